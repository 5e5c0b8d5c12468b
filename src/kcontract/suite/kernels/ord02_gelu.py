"""Calibration of ord02-gelu: a vector body with a scalar remainder, split by load.

bad: the elements are divided among as many workers as are idle when the call
starts (2 to 6, changing from call to call; emulated with the call count), and each
worker runs the vectorised gelu over multiples of 8 elements and a scalar fallback
over its remainder. The two paths use different erf implementations (the vector
path a correctly rounded erf, the scalar path the Abramowitz & Stegun 7.1.26
polynomial, |error| <= 1.5e-7), so the elements near the chunk boundaries change
their last bits with the number of workers -- the behaviour that makes vendor math
libraries offer a "conditional numerical reproducibility" mode. Accurate to ~1e-7:
passes allclose(1e-2).
good: the vector path for every element.
"""
import itertools
import math

import numpy as np

from kcontract.suite.kernels.ord_schedules import split

DTYPE = "float32"
WIDTH = 8
_CALLS = itertools.count()
_erf = np.frompyfunc(math.erf, 1, 1)


def baseline(x):
    return np.zeros_like(x)


def _vector(x32):
    z = x32.astype(np.float64)
    return (0.5 * z * (1.0 + _erf(z / math.sqrt(2.0)).astype(np.float64))).astype(np.float32)


def _scalar(x32):
    """Abramowitz & Stegun 7.1.26, in float32."""
    f = np.float32
    z = np.abs(x32) / f(math.sqrt(2.0))
    t = f(1.0) / (f(1.0) + f(0.3275911) * z)
    poly = t * (f(0.254829592) + t * (f(-0.284496736) + t * (f(1.421413741)
                + t * (f(-1.453152027) + t * f(1.061405429)))))
    erf = np.sign(x32) * (f(1.0) - poly * np.exp(-z * z))
    return (f(0.5) * x32 * (f(1.0) + erf)).astype(np.float32)


def bad(x):
    flat = x.astype(np.float32).reshape(-1)
    out = np.empty_like(flat)
    workers = 2 + next(_CALLS) % 5
    with np.errstate(over="ignore", invalid="ignore"):
        for sl in split(flat.size, workers):
            body = sl.start + (sl.stop - sl.start) // WIDTH * WIDTH
            out[sl.start:body] = _vector(flat[sl.start:body])
            out[body:sl.stop] = _scalar(flat[body:sl.stop])
    return out.reshape(x.shape).astype(x.dtype)


def good(x):
    with np.errstate(over="ignore", invalid="ignore"):
        return _vector(x.astype(np.float32)).astype(x.dtype)
