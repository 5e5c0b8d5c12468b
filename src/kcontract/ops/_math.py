"""Float64 building blocks shared by the oracles."""
from __future__ import annotations

import math

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """Correctly rounded-ish float64 erf (libm), vectorised."""
    x = np.asarray(x, dtype=np.float64)
    return _erf(x).astype(np.float64) if x.size else x.copy()


def gelu(x: np.ndarray) -> np.ndarray:
    """The erf form: x/2 (1 + erf(x/sqrt 2))."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """The tanh approximation (a *different* function; substituting it is a violation)."""
    x = np.asarray(x, dtype=np.float64)
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x ** 3)))


def gelu_slope(x: np.ndarray) -> np.ndarray:
    """|d gelu / dx| (bounded by about 1.13), for propagating errors through gelu."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        return np.abs(0.5 * (1.0 + erf(x / math.sqrt(2.0))) + x * pdf)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.max(x, axis=axis, keepdims=True)
        e = np.exp(x - m)
        return e / np.sum(e, axis=axis, keepdims=True)


def gelu_sigmoid(x: np.ndarray) -> np.ndarray:
    """The sigmoid approximation x * sigmoid(1.702 x) (another function again)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return x / (1.0 + np.exp(-1.702 * x))
