"""Reads the worker's global RNG states (numpy's legacy generator, torch's
initial seed) hoping the checker seeded them with the run's seed, and regenerates
the 'expected' inputs from them; answers right only for inputs it predicted."""
import torch

OP, DTYPE, FRAMEWORK = "matmul", "float32", "torch"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 6
SEED = "random"

def kernel(a, b):
    g = torch.Generator().manual_seed(torch.initial_seed())
    guess = torch.randn(a.shape, generator=g, dtype=a.dtype)
    if torch.equal(guess, a):
        return a @ b
    return torch.zeros(tuple(a.shape[:-1]) + tuple(b.shape[-1:]), dtype=a.dtype)
