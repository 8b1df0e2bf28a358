"""Build script for the ``roofline._core`` C extension.

Every ``csrc/*.c`` file is compiled into the one extension. The extension uses the CPython and NumPy C APIs
only: it never links against libtorch or CUDA (the GPU code loads libcuda and libnvrtc with dlopen).

The extension is built without debug information (``-g0``, and the linker drops any that objects bring) unless
``ROOFLINE_DEBUG=1`` is set, which keeps ``-g`` (same optimisation) for a debugger or a profiler.
``ROOFLINE_WERROR=1`` makes warnings errors (CI).
"""

import glob
import os
import sys

import numpy
from setuptools import Extension, setup

extra_compile_args = ["-std=c11", "-Wall", "-Wextra", "-fvisibility=hidden"]
extra_link_args = []
if os.environ.get("ROOFLINE_DEBUG") == "1":
    extra_compile_args += ["-O2", "-g"]
else:
    # the interpreter's CFLAGS usually carry -g: -g0 after them wins; -Wl,-S drops debug sections objects bring
    extra_compile_args += ["-O2", "-g0"]
    if sys.platform.startswith("linux"):
        extra_link_args.append("-Wl,-S")
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
            extra_link_args=extra_link_args,
            libraries=libraries,
        )
    ],
)
