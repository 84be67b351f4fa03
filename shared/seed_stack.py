"""Several copies of one small model, trained at once: seeds (or same-shaped members) batched.

At tiny sizes a model's matmuls are too small to keep a core busy, and a training step's time goes to
Python, Lightning's hooks and the optimiser's per-tensor loop. `SeedStack(models)` stacks the members'
parameters and buffers along a leading member axis (`torch.func.stack_module_state`) and runs all of them
in one vmapped call (`torch.func.functional_call`): K members cost about one member's overhead.

    stack = SeedStack([make_encoder(seed=s) for s in seeds])
    z = stack(x)              # x: (K, B, ...), member k sees x[k]; stack(x, in_dims=(None,)) shares x
    loss = sum(loss_of(z[k], y[k]) for k in range(K))   # the SUM of the members' own losses
    enc_k = stack.member(k)   # a plain module with member k's weights

Equality with separate runs: member k's gradient of the summed loss is its own loss's gradient, and an
elementwise optimiser (SGD, Adam, AdamW, with or without weight decay) then updates each member as its own
run would, given the same initial weights and the same batches. The results agree to float rounding (the
batched kernels may sum in another order; tests/shared/test_seed_stack.py checks member by member against
separate runs, and the papers that use it test their own use). What would break the equality, and is not
done here: clipping by the global gradient norm or a scheduler keyed on the total loss (they couple the
members), randomness inside the forward (dropout draws one stream for the stack), BatchNorm in training mode
(its running statistics are updated in place; refused at construction).
"""
from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import nn
from torch.func import functional_call, stack_module_state


def _key(name: str) -> str:
    return name.replace(".", "__")


class SeedStack(nn.Module):
    """K members of one architecture with their own weights; forward maps inputs (K, ...) -> outputs (K, ...)."""

    def __init__(self, models: Sequence[nn.Module]):
        super().__init__()
        models = list(models)
        if not models:
            raise ValueError("SeedStack needs at least one member")
        shapes = [[(n, tuple(p.shape)) for n, p in m.state_dict().items()] for m in models]
        if any(s != shapes[0] for s in shapes[1:]):
            raise ValueError("SeedStack members must share one architecture (same parameter names and shapes)")
        bn = [n for n, m in models[0].named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        if bn:
            raise ValueError(f"SeedStack cannot batch BatchNorm layers ({', '.join(bn)}): their running statistics "
                             "are updated in place")
        params, buffers = stack_module_state(models)
        self.k = len(models)
        self._names = list(params)
        self._buffer_names = list(buffers)
        self.stacked = nn.ParameterDict({_key(n): nn.Parameter(v.detach().clone()) for n, v in params.items()})
        for n, v in buffers.items():
            self.register_buffer(f"buf__{_key(n)}", v.detach().clone())
        # lists, so neither is a submodule: the template keeps the architecture for `member`, the meta copy
        # is what functional_call runs with the stacked tensors swapped in
        self._template = [copy.deepcopy(models[0])]
        self._base = [copy.deepcopy(models[0]).to("meta")]

    def _state(self):
        params = {n: self.stacked[_key(n)] for n in self._names}
        buffers = {n: getattr(self, f"buf__{_key(n)}") for n in self._buffer_names}
        return params, buffers

    def forward(self, *inputs, in_dims: tuple | None = None):
        """Every member on its own slice of each input (leading axis K), or on a shared input where
        `in_dims` holds None for it."""
        in_dims = tuple(in_dims) if in_dims is not None else (0,) * len(inputs)
        if len(in_dims) != len(inputs):
            raise ValueError(f"in_dims has {len(in_dims)} entries for {len(inputs)} inputs")
        for x, d in zip(inputs, in_dims):
            if d is not None and x.shape[d] != self.k:
                raise ValueError(f"an input's member axis has {x.shape[d]} entries for {self.k} members")
        params, buffers = self._state()

        def one(p, b, *xs):
            return functional_call(self._base[0], (p, b), xs)

        return torch.vmap(one, in_dims=(0, 0, *in_dims), randomness="error")(params, buffers, *inputs)

    def member(self, k: int) -> nn.Module:
        """A plain copy of the architecture holding member k's weights (on the stack's device)."""
        params, buffers = self._state()
        out = copy.deepcopy(self._template[0])
        state = {n: v[k].detach().clone() for n, v in {**params, **buffers}.items()}
        out.load_state_dict(state)
        return out.to(next(iter(params.values())).device)
