"""MMP: Multimodal Prototyping for cancer survival prediction (Song et al., ICML 2024).

Public API: `gmm_aggregate` (PANTHER's MAP-EM step of a diagonal GMM started at the prototypes)
and `cox_loss` (the Cox partial likelihood over a batch)."""
from .losses import cox_loss
from .panther import gmm_aggregate

__all__ = ["gmm_aggregate", "cox_loss"]
