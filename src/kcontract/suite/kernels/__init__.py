"""Three-state calibration kernels: one module per contract (baseline, bad, good).

They are part of the suite on purpose: users can read what each contract
catches, and what it must not reject.
"""
