"""EVEREST (Hwang et al., ICML 2024): motion-token masked video autoencoding vs VideoMAE.

Public API: `motion_scores` (redundancy score of every token) and `select_tokens` (the
pre-training top-K + random visible/target split). See selection.py.
"""
from .selection import motion_scores, select_tokens

__all__ = ["motion_scores", "select_tokens"]
