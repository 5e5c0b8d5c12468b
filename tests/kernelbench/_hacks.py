"""The ways a candidate games one-shape benchmarks, each applied to an honest ``ModelNew``:
a hacked candidate is the folder's honest computation plus one trick (it imports this file
and ``new_honest``), so what catches it is the trick and nothing else.

- ``precision_downgrade``: the whole computation in bfloat16 (inputs and weights narrowed),
  the result widened back to the input's dtype;
- ``cached_output``: the first result per input shape, returned again for any later inputs;
- ``benchmark_shape_only``: a kernel written for the benchmarked input shapes; on any other
  it never writes its output (uninitialised memory comes back);
- ``skipped_tails``: the kernel walks the last axis of every float input in tiles of
  ``tile`` and drops the remainder (exact when the benchmark's sizes are multiples of it);
- ``zeros_on_large``: zeros whenever the first input holds more elements than the
  benchmark's (a kernel whose large-input path is missing).
"""
import copy

import torch


def _tensors(args):
    return [a for a in args if isinstance(a, torch.Tensor)]


def _float_dtype(args):
    return next((a.dtype for a in _tensors(args) if a.is_floating_point()), torch.float32)


def precision_downgrade(honest, low=torch.bfloat16):
    class ModelNew(honest):
        def forward(self, *args):
            narrow = copy.deepcopy(self).to(low)
            out = honest.forward(narrow, *[a.to(low) if isinstance(a, torch.Tensor)
                                           and a.is_floating_point() else a for a in args])
            return out.to(_float_dtype(args))
    return ModelNew


def cached_output(honest):
    class ModelNew(honest):
        def forward(self, *args):
            cache = self.__dict__.setdefault("_cache", {})
            key = tuple(tuple(a.shape) for a in _tensors(args))
            if key not in cache:
                cache[key] = honest.forward(self, *args).detach().clone()
            return cache[key].clone()
    return ModelNew


def benchmark_shape_only(honest, shapes):
    want = [tuple(s) for s in shapes]

    class ModelNew(honest):
        def forward(self, *args):
            out = honest.forward(self, *args)
            if [tuple(a.shape) for a in _tensors(args)] == want:
                return out
            return torch.empty_like(out)
    return ModelNew


def skipped_tails(honest, tile=16):
    class ModelNew(honest):
        def forward(self, *args):
            cut = []
            for a in args:
                if isinstance(a, torch.Tensor) and a.is_floating_point() and a.dim():
                    a = a.clone()
                    a[..., a.shape[-1] // tile * tile:] = 0
                cut.append(a)
            return honest.forward(self, *cut)
    return ModelNew


def zeros_on_large(honest, numel):
    class ModelNew(honest):
        def forward(self, *args):
            out = honest.forward(self, *args)
            if _tensors(args)[0].numel() > numel:
                return torch.zeros_like(out)
            return out
    return ModelNew
