"""jax.nn.standardize, both variance algorithms, on rows with a large common offset."""
import numpy as np, jax, jax.numpy as jnp

x = (1000 + np.random.default_rng(0).standard_normal((4, 1024))).astype(np.float32)
ref = (x.astype(np.float64) - x.mean(-1, keepdims=True, dtype=np.float64)) / np.sqrt(x.astype(np.float64).var(-1, keepdims=True) + 1e-5)
for alg in ("fast", "stable"):
    y = np.asarray(jax.nn.standardize(jnp.asarray(x), axis=-1, algorithm=alg), dtype=np.float64)
    print(f"standardize {alg:6s} max |err| on 1000 + N(0,1): {np.abs(y - ref).max():.3g}")
