"""The contracts of the LLM-era ops, per family (the family tests add them to the
contracts they expect, and calibrate them with the rest)."""
PRC = {"prc01-rmsnorm", "prc04-silu_mul", "prc01-cumsum", "prc04-rope", "prc02-cross_entropy", "prc01-scaled_matmul",
       "prc01-scaled_matmul_f32", "prc04-conv2d"}
ORD = {"ord03-rmsnorm", "ord01-cumsum", "ord02-topk"}
CMP = {"cmp03-rmsnorm", "cmp03-silu_mul", "cmp03-cumsum", "cmp03-rope", "cmp03-topk", "cmp03-cross_entropy", "cmp03-scaled_matmul", "cmp03-conv2d"}
EXC = {"exc01-rmsnorm", "exc01-silu_mul", "exc01-topk", "exc02-cross_entropy"}
