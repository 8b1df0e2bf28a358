"""Build script for the ``roofline._core`` C extension.

Every ``csrc/*.c`` file is compiled into the one extension. The extension uses the CPython and NumPy C APIs
only: it never links against libtorch or CUDA (the GPU code loads libcuda and libnvrtc with dlopen).
"""

import glob
import os
import sys

import numpy
from setuptools import Extension, setup

extra_compile_args = ["-std=c11", "-O2", "-Wall", "-Wextra", "-fvisibility=hidden"]
if os.environ.get("ROOFLINE_WERROR") == "1":
    extra_compile_args.append("-Werror")
libraries = []
if sys.platform.startswith("linux"):
    libraries = ["dl", "pthread", "m"]

setup(
    ext_modules=[
        Extension(
            "roofline._core",
            sources=sorted(glob.glob("csrc/*.c")),
            include_dirs=["csrc", numpy.get_include()],
            extra_compile_args=extra_compile_args,
            libraries=libraries,
        )
    ],
)
