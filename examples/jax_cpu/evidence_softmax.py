"""jax.nn.softmax at float32 on wide logits: where its errors are."""
import numpy as np, jax, jax.numpy as jnp
rng = np.random.default_rng(0)
x = (rng.uniform(-1, 1, (16, 256)) * 100).astype(np.float32)   # logits spread ~ +-100
out = np.asarray(jax.nn.softmax(jnp.asarray(x), axis=-1)).astype(np.float64)
x64 = x.astype(np.float64); e = np.exp(x64 - x64.max(-1, keepdims=True)); ref = e / e.sum(-1, keepdims=True)
tiny = np.finfo(np.float32).tiny
sub = (ref > 0) & (ref < tiny)
big = ~sub
print("outputs whose exact value is a float32 subnormal:", sub.sum(), "of them returned as 0:", (out[sub] == 0).sum())
print("max relative error where the exact value is normal:", (np.abs(out - ref)[big & (ref > 0)] / ref[big & (ref > 0)]).max())
