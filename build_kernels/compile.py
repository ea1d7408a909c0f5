"""One class's build, in a process of its own: python -m build_kernels.compile OUT.so.

Numba's target is the environment's NUMBA_CPU_NAME and NUMBA_CPU_FEATURES
(build_kernels sets them to the class's). Exits non-zero, with the reason
on stderr, where the kernels do not compile or no C compiler driver links
them (an object file alone would need llvmlite to load at run time). Its
last line of output is the record of what built it, as JSON: the
manifest's fields (_shipped.write_manifest).
"""

import json
import os
import platform
import sys
import tempfile
from importlib import metadata

import llvmlite.binding as ll

from agefast.kernels import _build, _native


def record() -> dict[str, str]:
    """What built the library: what a third party needs to build the same bytes again (with the sources)."""
    return {"python": platform.python_version(), "numba": metadata.version("numba"),
            "llvmlite": metadata.version("llvmlite"), "llvm": ".".join(map(str, ll.llvm_version_info)),
            "machine": platform.machine(), "linker": _build.linker()}


def main(out: str) -> None:
    obj, _, _ = _build.compile_object()  # type: ignore[no-untyped-call]  # exempt, as the kernel modules (pyproject.toml)
    with tempfile.TemporaryDirectory(prefix="agefast-link-") as scratch:
        shared = _build.link_shared(obj, scratch)
        if shared is None:
            sys.exit("the C compiler driver ($CC, else cc) is missing or did not link the kernels "
                     "into a shared library")
        # every symbol resolves now (ctypes loads with RTLD_NOW), on any CPU
        with open(shared, "rb") as f:
            data = f.read()
        _native.load_library(data)
    with open(out + ".partial", "wb") as f:
        f.write(data)
    os.replace(out + ".partial", out)
    print(json.dumps(record()))


if __name__ == "__main__":
    main(sys.argv[1])
