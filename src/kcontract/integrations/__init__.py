"""Integrations: kcontract inside other tools' workflows: the pytest plugin
(:mod:`.pytest_plugin`, registered through the ``pytest11`` entry point) and KernelBench
(:mod:`.kernelbench`).  Importing this package imports nothing else."""
