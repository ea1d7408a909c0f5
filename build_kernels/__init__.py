"""Compile the kernels for the CPU classes the package ships (agefast.kernels._shipped), when it is built.

setup.py calls ship() from its build_py step, for a wheel (`pip install .`,
`python -m build`), never for an editable install. Which classes:
AGEFAST_BUILD_KERNELS = "host" (the default: the one class the building
machine runs, ~30-40 s of CPU on an AVX2-only Zen 2), "all" (every class of the building
machine's architecture, one process per core: what a release wheel sets),
"none", or class names separated by commas. Each class compiles in its own
process with Numba's CPU name and features set to the class's, and a fresh
Numba cache. By default a class that fails to compile or link is left out,
with the reason printed: the install goes on, and that class's CPUs compile
at run time where numba is installed (agefast[jit]), else run on
cryptography. A class asked for by name (or by "all", a release's build)
that fails, or a name of no class, fails the build: a wheel missing a class
it was built to carry would only be found slow on the CPUs it serves.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from agefast.io import cpus
from agefast.kernels import _cache, _shipped

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = os.path.join(ROOT, "agefast", "kernels")


_WITHOUT = ("the kernels compile at run time where numba is installed (pip install 'agefast[jit]'); without it, "
            "payloads run on cryptography")


def _say(message: str) -> None:
    print(f"agefast kernels: {message}", file=sys.stderr, flush=True)


class BuildFailed(SystemExit):
    """A class asked for was not built: the build stops with the reason (setuptools shows a SystemExit's)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"agefast kernels: {message}")


def asked_by_name(setting: str) -> bool:
    """Whether an AGEFAST_BUILD_KERNELS `setting` names its classes (or "all"), rather than leaving them to the host."""
    return setting.strip() not in ("", "host", "none")


def selected(setting: str, machine: str, flags: frozenset[str],
             family: tuple[str, int] | None = None) -> list[_shipped.CpuClass]:
    """The classes an AGEFAST_BUILD_KERNELS `setting` asks for on a `machine` with `flags` (of CPU `family`,
    where known); BuildFailed for a name of no class."""
    setting = setting.strip() or "host"
    ours = [c for c in _shipped.CLASSES if c.machine == machine]
    if setting == "none":
        return []
    if setting == "all":
        return ours
    if setting == "host":
        host = _shipped.choose(machine, flags, frozenset(c.name for c in ours), family)
        return [host] if host is not None else []
    names = [name.strip() for name in setting.split(",") if name.strip()]
    unknown = [name for name in names if name not in {c.name for c in ours}]
    if unknown:
        raise BuildFailed(f"no class {', '.join(unknown)} for {machine} (AGEFAST_BUILD_KERNELS={setting!r}; the "
                          f"classes: {', '.join(c.name for c in ours)}, or host, all, none)")
    return [c for c in ours if c.name in names]


def _compile(cpu_class: _shipped.CpuClass, out: str, root: str = ROOT) -> tuple[bool, str, dict[str, str]]:
    """Compile one class into the shared library `out` from the source tree `root`:
    (done, what to report, the record of what built it: build_kernels.compile's)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agefast-build-") as scratch:
        # the builder's settings that change what is compiled (a form, an
        # optimisation level) stay out: the class's build is the same anywhere
        env = {k: v for k, v in os.environ.items() if not _cache.is_build_setting(k)}
        env.update(NUMBA_CPU_NAME=cpu_class.cpu, NUMBA_CPU_FEATURES=cpu_class.features, NUMBA_CACHE_DIR=scratch,
                   PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
        if cpu_class.form:      # a class's own form (Zen 5's split-wide)
            env["AGEFAST_KERNEL_FORM"] = cpu_class.form
        try:
            done = subprocess.run([sys.executable, "-m", "build_kernels.compile", out], cwd=root, env=env,
                                  capture_output=True, text=True, timeout=1800)
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"{cpu_class.name}: {e}", {}
    seconds = time.monotonic() - started
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return False, f"{cpu_class.name} failed after {seconds:.0f} s: {why}", {}
    return True, f"{cpu_class.name} compiled in {seconds:.0f} s", json.loads(done.stdout.splitlines()[-1])


def ship(directory: str) -> None:
    """Fill `directory` (the package's prebuilt/ in the build tree) with the selected classes and the manifest."""
    shutil.rmtree(directory, ignore_errors=True)
    setting = os.environ.get("AGEFAST_BUILD_KERNELS", "")
    classes = selected(setting, os.uname().machine, _shipped.host_flags(), _shipped.host_family())
    if not classes:
        _say(f"no class to build (AGEFAST_BUILD_KERNELS={setting!r}, {os.uname().machine}): {_WITHOUT}")
        return
    os.makedirs(directory)
    paths = {c.name: os.path.join(directory, c.name + ".so") for c in classes}
    cores = cpus.count()
    with ThreadPoolExecutor(max_workers=min(cores, len(classes))) as pool:
        outcomes = list(pool.map(lambda c: _compile(c, paths[c.name]), classes))
    builds = {}
    record: dict[str, str] = {}
    failed = [report for done, report, _ in outcomes if not done]
    if failed and asked_by_name(setting):
        shutil.rmtree(directory)
        raise BuildFailed(f"{'; '.join(failed)} (AGEFAST_BUILD_KERNELS={setting!r}: unset it to install without "
                          "the classes that failed)")
    for cpu_class, (done, report, built_by) in zip(classes, outcomes):
        _say(report)
        if done:
            with open(paths[cpu_class.name], "rb") as f:
                builds[cpu_class.name] = hashlib.sha256(f.read()).hexdigest()
            record = built_by       # every class's process runs the same releases and linker
    if not builds:
        shutil.rmtree(directory)
        _say(f"nothing shipped: {_WITHOUT}")
        return
    with open(os.path.join(directory, _shipped.MANIFEST), "w", encoding="utf-8") as f:
        f.write(_shipped.write_manifest(_shipped.source_digest(SOURCES), record, builds))
