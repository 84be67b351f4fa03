"""One subpackage per ICML 2024 paper: p2l, everest, mmp, freebind, e2gan.

Each is self-contained: it may import `shared` and `kernels`, never another paper.
"""
