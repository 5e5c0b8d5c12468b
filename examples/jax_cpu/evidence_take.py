import numpy as np, jax, jax.numpy as jnp
t = jnp.arange(1.0, 6.0).reshape(5, 1)   # V = 5 rows holding 1..5
idx = jnp.array([-1, -5, -6, 4, 5, 7])
print("indices           ", idx.tolist())
print("jnp.take (default)", jnp.take(t, idx, axis=0)[:, 0].tolist())
print("t[idx] (indexing) ", t[idx][:, 0].tolist())
print("jnp.take clip     ", jnp.take(t, idx, axis=0, mode="clip")[:, 0].tolist())
x = (1000 + np.random.default_rng(0).standard_normal((4, 1024))).astype(np.float32)
ref = (x.astype(np.float64) - x.mean(-1, keepdims=True, dtype=np.float64)) / np.sqrt(x.astype(np.float64).var(-1, keepdims=True) + 1e-5)
for alg in ("fast", "stable"):
    y = np.asarray(jax.nn.standardize(jnp.asarray(x), axis=-1, algorithm=alg), dtype=np.float64)
    print(f"standardize {alg:6s} max |err| on 1000 + N(0,1): {np.abs(y - ref).max():.3g}")
