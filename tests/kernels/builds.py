"""The kernel builds the tests make, and how this host runs each: natively, or an AVX-512 class lowered for AVX2.

Each class in the form it ships in (SHIPPED_FORMS), and the forms
AGEFAST_KERNEL_FORM asks for to be measured against it, so that every lane
code and loop runs somewhere: two passes with IFMA's lanes and with 26-bit
ones in zmm, split with 26-bit lanes beside the zmm loop (two chains of
24 blocks) and beside the ymm loop (split-wide's two sets of blocks are
Zen 5's classes').
"""

import platform
import textwrap

from agefast.kernels import _shipped

AVX2 = next(c for c in _shipped.CLASSES if c.name == "avx2")
SHIPPED_FORMS = {"avx512ifma-zen5": "split-wide", "avx512ifma": "split", "avx512f": "stitched",
                 "avx2-zen5": "split-wide", "avx2": "stitched", "aarch64": "two-pass"}
BUILDS = ([(c, "") for c in _shipped.CLASSES]
          + [(c, "two-pass") for c in _shipped.CLASSES if c.name in ("avx512ifma", "avx512f")]
          + [(c, "split") for c in _shipped.CLASSES if c.name in ("avx512f", "avx2")])
IDS = [c.name + (f"-{f}" if f else "") for c, f in BUILDS]


def runs_natively(cpu_class: _shipped.CpuClass) -> bool:
    """Whether this CPU runs `cpu_class`'s build as it is."""
    return platform.machine() == cpu_class.machine and _shipped.required_flags(cpu_class) <= _shipped.host_flags()


def runs_lowered(cpu_class: _shipped.CpuClass) -> bool:
    """Whether `cpu_class` is an AVX-512 class whose code this CPU runs lowered for AVX2 (tests/kernels/lowered.py)."""
    return cpu_class.name.startswith("avx512") and runs_natively(AVX2)


def lowered_head(cpu_class: _shipped.CpuClass) -> str:
    """A script's first lines that make the kernel modules emit `cpu_class`'s code for AVX2 (`seen`: what
    they emitted), run with AVX2's target_env()."""
    return textwrap.dedent(f"""
        from tests.kernels import lowered
        seen = lowered.lower({cpu_class.features!r})
    """)


def target_env(cpu_class: _shipped.CpuClass) -> dict[str, str]:
    """Numba's target for a build of `cpu_class` as it is."""
    return {"NUMBA_CPU_NAME": cpu_class.cpu, "NUMBA_CPU_FEATURES": cpu_class.features}
