"""The contracts of the LLM-era ops, per family (the family tests add them to the
contracts they expect, and calibrate them with the rest)."""
PRC = {"prc01-rmsnorm"}
ORD = {"ord03-rmsnorm"}
CMP = {"cmp03-rmsnorm"}
EXC = {"exc01-rmsnorm"}
