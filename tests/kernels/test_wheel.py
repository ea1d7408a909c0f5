"""The package as its wheel ships it: built, installed without numba, llvmlite or numpy, and run.

A wheel of this source tree with the host's class (AGEFAST_BUILD_KERNELS=host,
as `pip install .` builds it; ~20-40 s, once per module) is installed into a
fresh venv beside exactly the distributions its Requires-Dist names, and their
own, linked file by file from this environment (so no index is needed): there
numba, llvmlite and numpy cannot be found at all.
"""

import email.parser
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from agefast.kernels import _loader, _shipped

ROOT = Path(__file__).resolve().parents[2]
# What the build reads: setup.py, pyproject.toml (and the README it names), the packages.
_TREE = ("pyproject.toml", "setup.py", "README.md", "build_kernels", "agefast", "perfprof", "torture")
# Numba's target variables would make the build and the loader pass the shipped builds by.
_ENV = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "AGEFAST_KERNEL_FORM")}

pytestmark = pytest.mark.requires_tool(os.environ.get("CC", "cc"))     # links the kernels into a shared library


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel of this tree with the host's class, built as `pip install .` builds one."""
    if _shipped.host_class() is None:
        pytest.skip("no shipped class fits this CPU")
    src = tmp_path_factory.mktemp("src")
    for name in _TREE:      # a copy: the build leaves build/ and *.egg-info where it runs
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "prebuilt"))
        else:
            shutil.copy(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-w", str(out), str(src)], env=dict(_ENV, AGEFAST_BUILD_KERNELS="host"),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    [built] = out.glob("agefast-*.whl")
    return built


def _requires(requires_dist: list[str]) -> list[Requirement]:
    """The requirements of a distribution's Requires-Dist lines that hold without extras, here."""
    requirements = [Requirement(r) for r in requires_dist]
    return [r for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]


def _closure(requirements: list[Requirement]) -> dict[str, importlib.metadata.Distribution]:
    """The distributions of this environment that `requirements` need, and theirs, by name."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        name = todo.pop().name.lower().replace("_", "-")
        if name not in found:
            found[name] = importlib.metadata.distribution(name)
            todo += _requires(found[name].requires or [])
    return found


def install(wheel: Path, venv: Path) -> Path:
    """A fresh venv holding the wheel and what it requires; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    with zipfile.ZipFile(wheel) as z:
        [metadata] = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        requires = _requires(email.parser.Parser().parsestr(z.read(metadata).decode()).get_all("Requires-Dist", []))
    for dist in _closure(requires).values():
        for file in dist.files or ():
            target = site / file
            if ".." not in file.parts:      # not its console scripts
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(file.locate())
    # pip checks the wheel's requirements against the venv alone (no index):
    # each is there, as in an install from PyPI, and nothing else is.
    # Without PYTHONPATH: a checkout on it (its agefast.egg-info) would count as agefast installed already.
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index",
                           "--no-cache-dir", str(wheel)], env={k: v for k, v in _ENV.items() if k != "PYTHONPATH"},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return python


ROUND_TRIP = textwrap.dedent("""
    import importlib.util, json, sys
    import agefast
    from agefast import kernels, x25519
    identity = x25519.Identity.generate()
    data = bytes(range(256)) * (int(sys.argv[1]) // 256)
    sealed = agefast.encrypt(data, [identity.to_public()], threads=2)
    ok = agefast.decrypt(sealed, [identity], threads=2) == data
    with open("/proc/self/maps") as f:
        shipped = "memfd:agefast-kernels-" in f.read()
    print(json.dumps({
        "round_trip": ok, "agefast": agefast.__file__, "warm": kernels.is_warm(), "shipped": shipped,
        "isa": kernels.isa() if kernels.is_warm() else None,
        "findable": [n for n in ("numba", "llvmlite", "numpy") if importlib.util.find_spec(n) is not None],
        "imported": sorted({m.split(".")[0] for m in sys.modules} & {"numba", "llvmlite", "numpy"})}))
""")


def venv_env(home: Path) -> dict[str, str]:
    """The environment of a process in the venv: not this checkout (PYTHONPATH), no kernel cache (an empty home)."""
    env = {k: v for k, v in _ENV.items() if k not in ("PYTHONPATH", "NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    return dict(env, HOME=str(home))


def round_trip(python: Path, size: int, home: Path) -> dict[str, object]:
    done = subprocess.run([str(python), "-I", "-W", "error", "-c", ROUND_TRIP, str(size)], env=venv_env(home),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_wheel_runs_its_shipped_build_without_numba_llvmlite_or_numpy(wheel, tmp_path):
    python = install(wheel, tmp_path / "venv")
    host = _shipped.host_class()
    result = round_trip(python, 16 << 20, tmp_path / "home")
    assert result == {"round_trip": True, "agefast": result["agefast"], "warm": True, "shipped": True,
                      "isa": _loader._isa_of(host.features), "findable": [], "imported": []}
    assert Path(str(result["agefast"])).is_relative_to(tmp_path / "venv")


def test_without_numba_or_a_shipped_build_the_payload_runs_on_cryptography_and_warm_up_says_why(wheel, tmp_path):
    python = install(wheel, tmp_path / "venv")
    site = Path(subprocess.run([str(python), "-I", "-c", "import agefast; print(agefast.__file__)"], check=True,
                               capture_output=True, text=True).stdout.strip()).parent
    shutil.rmtree(site / "kernels" / "prebuilt")      # as a wheel built with AGEFAST_BUILD_KERNELS=none
    result = round_trip(python, 16 << 20, tmp_path / "home")
    assert {k: result[k] for k in ("round_trip", "warm", "shipped", "findable", "imported")} == {
        "round_trip": True, "warm": False, "shipped": False, "findable": [], "imported": []}
    done = subprocess.run([str(python.parent / "agefast"), "--warm-up"],
                          env=dict(venv_env(tmp_path / "home"), PYTHONWARNINGS="error"), capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stdout) == (0, "")
    assert re.fullmatch(r"agefast: payload engine: cryptography; no kernel build shipped with agefast runs here "
                        r"\(none was built with this install\), and numba and llvmlite, which would compile one, "
                        "cannot be imported "
                        r"\(No module named '(numba|llvmlite)'; pip install 'agefast\[jit\]' adds them\)\n",
                        done.stderr)
