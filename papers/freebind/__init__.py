"""FreeBind (Wang et al., ICML 2024): space bonds that fuse expert spaces into a unified multimodal space."""
from .bonds import combination_bond, displacement_bond, pseudo_tuples, sequential_bond, train_bond
from .projector import MoP, Projector, ProjectorBank, l2norm, mix

__all__ = ["Projector", "MoP", "ProjectorBank", "mix", "l2norm", "combination_bond", "displacement_bond",
           "sequential_bond", "pseudo_tuples", "train_bond"]
