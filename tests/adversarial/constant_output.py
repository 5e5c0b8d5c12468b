"""Constant output: the expected value of a matmul of uniform [0, 1) inputs (K/4),
whatever the inputs. Close to right on average, unrelated to the inputs."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "C-PRC-01"
FAMILY = 0


def kernel(a, b):
    return np.full(a.shape[:-1] + b.shape[-1:], a.shape[-1] / 4.0, dtype=a.dtype)
