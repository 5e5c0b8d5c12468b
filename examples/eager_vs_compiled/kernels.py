"""The same GELU two ways on the same machine: torch's eager kernel and the kernel
torch.compile (Inductor) generates for it. Compiled mode diverging from eager mode is one
of the disagreements seen across ML stacks; the contract says which one keeps it."""
import torch
import torch.nn.functional as F


def eager_gelu(x):
    return F.gelu(x)


def _gelu(x):
    return F.gelu(x)


#: compiled once per process, for any shape (dynamic=True): the sweep does not recompile
compiled_gelu = torch.compile(_gelu, dynamic=True)


def _softmax(x):
    return torch.softmax(x, dim=-1)


def _layernorm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def _linear_gelu(x, w, b):
    return F.gelu(x @ w + b)


compiled_softmax = torch.compile(_softmax, dynamic=True)
compiled_layernorm = torch.compile(_layernorm, dynamic=True)
compiled_linear_gelu = torch.compile(_linear_gelu, dynamic=True)
