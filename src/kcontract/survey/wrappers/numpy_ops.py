"""numpy's own ops in kcontract's calling conventions, where the table needs a wrapper."""
import ml_dtypes
import numpy as np


def cast(x, dtype=None):
    name = str(dtype)
    return x.astype(getattr(ml_dtypes, name, None) or np.dtype(name))
