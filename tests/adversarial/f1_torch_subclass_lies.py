"""A torch.Tensor subclass that reports the expected shape through
__torch_function__ (size(), shape, dim()) while holding an empty storage."""
import torch

OP, DTYPE, FRAMEWORK = "matmul", "float32", "torch"
CLASSES = ["C-PRC-01"]
EXPECTED = 'kernel.wrong-shape'
FAMILY = 1


class Liar(torch.Tensor):
    claimed = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.size,) or getattr(func, "__name__", "") == "shape":
            if Liar.claimed is not None:
                return torch.Size(Liar.claimed)
        return super().__torch_function__(func, types, args, kwargs or {})


def kernel(a, b):
    Liar.claimed = tuple(a.shape[:-1]) + tuple(b.shape[-1:])
    return torch.zeros((0,) + tuple(b.shape[-1:]), dtype=a.dtype).as_subclass(Liar)
