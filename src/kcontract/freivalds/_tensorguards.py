"""torch's compiled check of tensors' properties, for the checks' common calls.

Right after a large product every call into torch from Python runs from cold caches and
costs microseconds; a check that reads a dozen tensor properties one call at a time
(type, device, negation bit, dtype, sizes, strides) pays more for them than for its
arithmetic.  torch's compiler guards its compiled code with ``TensorGuards``: made from
example tensors, one call compares each tensor's Python type, dispatch keys (device,
layout, the negation and conjugation bits), dtype, requires_grad, sizes and strides with
the examples'.  The guard's lean linear check and verify's common call for CPU tensors
remember one for shapes they have passed, and read the properties one by one only where
it does not match.

It is an interface of torch's compiler, not a documented one: :func:`tensor_guards` makes
a self-test once and uses it only where it refuses every difference those checks rely on;
elsewhere (or without it) they read the properties as before.
"""
from __future__ import annotations

#: TensorGuards, or False where it is not to be used; None until first asked
_TG = None


def tensor_guards():
    """torch's TensorGuards where it is there and passes :func:`sound`; else False."""
    global _TG
    if _TG is None:
        _TG = False
        try:
            import torch
            from torch._C._dynamo.guards import TensorGuards

            _TG = TensorGuards if sound(TensorGuards, torch) else False
        except Exception:  # (not there, or not the interface this was written for)
            _TG = False
    return _TG


def shape_guard(TG, tensors):
    """A TensorGuards for these tensors' exact sizes and strides."""
    return TG(*tensors, dynamic_dims_sizes=[list(t.shape) for t in tensors],
              dynamic_dims_strides=[list(t.stride()) for t in tensors])


def sound(TG, torch) -> bool:
    """Whether TG, made from contiguous float32 CPU tensors, passes their like and refuses
    each change the checks must see: a negated view (memory that is not the value),
    another dtype, other strides or sizes, another layout or device, requires_grad, another
    Python type."""
    a, b = torch.zeros(2, 64), torch.nn.Parameter(torch.zeros(3, 64), requires_grad=False)
    g = shape_guard(TG, (a, b))
    if not (g.check(a, b) and g.check(torch.ones(2, 64), b)):
        return False
    other = [
        torch._neg_view(a),
        a.double(), a.bfloat16(),
        torch.zeros(4, 64)[::2], torch.zeros(2, 65)[:, :64], torch.zeros(64, 2).T,
        torch.zeros(1, 64), torch.zeros(2, 64, 1), torch.zeros(128),
        a.to_sparse(), torch.zeros(2, 64, device="meta"),
        torch.zeros(2, 64, requires_grad=True),
        torch.nn.Parameter(torch.zeros(2, 64), requires_grad=False),  # another type
    ]
    if any(g.check(t, b) for t in other):
        return False
    return not g.check(a, torch.zeros(3, 64))  # (the second's type: a plain tensor)
