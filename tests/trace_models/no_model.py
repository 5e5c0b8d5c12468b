"""Not a KernelBench problem: no Model."""


def get_inputs():
    return []
