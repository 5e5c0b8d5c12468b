"""The optional compiled part of kcontract (everything else is in pyproject.toml).

kcontract.freivalds._fastc does the Freivalds check's per-call O(n) work in one call; when
it cannot be built (no C compiler), the check runs the same arithmetic in numpy.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("kcontract.freivalds._fastc",
                             ["src/kcontract/freivalds/_fastc.c"],
                             extra_compile_args=["-O3", "-fopenmp-simd"], optional=True)])
