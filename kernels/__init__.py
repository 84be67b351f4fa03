"""Triton kernels for the papers' hot loops, each beside a pure-torch reference and a dispatcher
(Triton on CUDA, the reference elsewhere). `kernels` never imports a paper."""
