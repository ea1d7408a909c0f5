"""The build steps pyproject.toml cannot declare: the kernels compiled into the wheel, and its platform tag.

build_py also compiles the kernels for the CPU classes build_kernels selects
(AGEFAST_BUILD_KERNELS) into agefast/kernels/prebuilt/, except for an
editable install, whose sources change in place (a run-time compile, cached,
serves those). The shared libraries are a C ABI called through ctypes, so
the wheel is tagged for the platform only: py3-none-<platform>, one wheel
for every CPython version.
"""

import os
import sys

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_kernels  # noqa: E402  # the source tree's, found through the line above


class BuildPyWithKernels(build_py):
    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            build_kernels.ship(os.path.join(self.build_lib, "agefast", "kernels", "prebuilt"))


class WithKernels(Distribution):
    # Platform code inside: the wheel is not pure, and the package goes to
    # platlib, the wheel's root (pure modules would go to its .data/purelib).
    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    def get_tag(self) -> tuple[str, str, str]:
        return "py3", "none", super().get_tag()[2]


setup(distclass=WithKernels, cmdclass={"build_py": BuildPyWithKernels, "bdist_wheel": PlatformWheel})
