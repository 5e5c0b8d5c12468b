"""jax.nn.gelu(approximate=False) at float16: its jaxpr, and an emulation that rounds every op to float16."""
import numpy as np, jax, jax.numpy as jnp
from math import sqrt
import scipy.special as sp
rng = np.random.default_rng(0)
x = rng.standard_normal(4096).astype(np.float16)
out = np.asarray(jax.nn.gelu(jnp.asarray(x), approximate=False))
x64 = x.astype(np.float64)
exact = 0.5 * x64 * (1 + sp.erf(x64 / sqrt(2)))
r = lambda v: np.asarray(v, np.float64).astype(np.float16).astype(np.float64)  # round to f16
once = r(exact)
ulp = np.spacing(np.abs(out).astype(np.float16)).astype(np.float64)
print("gelu float16: max |out - exact| in ulps:", np.max(np.abs(out - exact) / ulp).round(2),
      "| out == exact rounded once to float16:", np.mean(out == once).round(3))
print(jax.make_jaxpr(lambda v: jax.nn.gelu(v, approximate=False))(jnp.asarray(x[:2])))
c = np.float64(np.float16(np.sqrt(0.5)))  # the constant, itself rounded to float16: 0.70703125
emul = r(r(0.5 * x64) * r(sp.erfc(r(-x64 * c))))
print("constant sqrt(1/2) in float16:", c, "| out == emulation of the jaxpr (each op rounded to f16):",
      np.mean(out == emul).round(4), "| max ulps of emulation vs exact:",
      np.max(np.abs(emul - exact) / ulp).round(2))
for dt in (np.float32,):
    x32 = x.astype(dt)
    o32 = np.asarray(jax.nn.gelu(jnp.asarray(x32), approximate=False)).astype(np.float64)
    print("float32 gelu of the same values, max ulps vs exact:", np.max(np.abs(o32 - exact) / np.spacing(np.abs(o32).astype(np.float32)).astype(np.float64)).round(2))
