"""Code that two or more papers share: config, seeding, training, logging, io, provenance,
plotting and the claims ledger. `shared` never imports a paper."""
