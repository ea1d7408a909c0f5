"""agefast off Linux, simulated: the API, command and data tests pass with the Linux-only calls taken away.

No macOS or Windows machine runs this suite, so tests/simulated_platform
takes away what those systems lack (see its sitecustomize) in a pytest of
its own, and in every command that run starts, and runs the test files of
the public API, the commands and the data (streams, random access, the
CCTV vectors, Go age's and pyrage's files) there. Left out are the tests of
what only Linux or the kernels have: the kernels and the engine's choice
(tests/kernels, test_dispatch, test_engine_formats, test_steps,
test_file_driver, test_early_payload, test_prefix, test_cli_engine),
fallocate (test_reserve) and pipe sizes (test_pipes); and those that need
no second run: memory growth (test_memory), the docs, typing, and the
third-party engines over the fsspec filesystem (test_filesystem_dask,
test_filesystem_engines: test_filesystem covers the filesystem).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIMULATION = ROOT / "tests" / "simulated_platform"
API = ["test_pyrage_compat.py", "test_errors.py", "test_encrypting_reader.py", "test_filesystem.py",
       "test_x25519.py", "test_ssh.py", "test_tag.py", "test_scrypt.py", "test_plugin.py", "test_arguments.py",
       "test_format.py"]
COMMANDS = ["test_entry_point.py", "test_cli.py", "test_cli_rekey.py", "test_cli_safety.py", "test_cli_recipients.py", "test_cli_inspect.py",
            "test_cli_batchpass.py", "test_cli_terminal.py", "test_cli_progress.py"]
DATA = ["test_stream.py", "test_into.py", "test_seekable.py", "test_vectors.py", "test_interop.py", "test_pipeline.py",
        "test_direct.py", "test_source.py", "test_armor.py", "test_buffers.py"]
# scrypt against Go age and pyrage, about a minute: nothing of it differs off Linux, and the normal run has it.
DESELECTED = ["tests/test_interop.py::test_passphrase"]
# The skips a simulated run may have: what needs a program missing here (a failure under
# AGEFAST_REQUIRE_TOOLS=1), the tests of a call only Linux has, and those that force the kernels
# (conftest's engine_setting).
SKIPS = re.compile(r"needs .* on PATH|(copy_file_range|O_TMPFILE) is Linux.s|the simulated platform has no kernels")
# What the probe prints in a simulated process: each line a thing taken away.
PROBE = ("import os, sys, agefast\n"
         "print([n for n in ('memfd_create', 'preadv', 'pwritev', 'pread', 'pwrite', 'copy_file_range', "
         "'sched_getaffinity', 'O_DIRECT', 'O_TMPFILE') if hasattr(os, n)])\n"
         "for name in ('fcntl', 'numba', 'llvmlite'):\n"
         "    try:\n"
         "        __import__(name)\n"
         "        print(name, 'imports')\n"
         "    except ImportError:\n"
         "        pass\n"
         "try:\n"
         "    open('/proc/cpuinfo', 'rb')\n"
         "    print('/proc opens')\n"
         "except OSError:\n"
         "    pass\n"
         "from agefast import kernels\n"
         "print(kernels.cached())\n")


def simulated(tmp_path: Path) -> dict[str, str]:
    """The environment of a process on the simulated platform."""
    path = [str(SIMULATION), str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    # Settings that ask for the kernels (AGEFAST_ENGINE=numba, NUMBA_DISABLE_JIT's reference route) do not apply.
    env = {k: v for k, v in os.environ.items() if k not in ("AGEFAST_ENGINE", "NUMBA_DISABLE_JIT")}
    return dict(env, AGEFAST_SIMULATE_PLATFORM="portable", PYTHONPATH=os.pathsep.join(path),
                NUMBA_CACHE_DIR=str(tmp_path / "kernel-cache"))


def test_the_simulation_takes_away_what_linux_alone_has(tmp_path):
    done = subprocess.run([sys.executable, "-c", PROBE], env=simulated(tmp_path), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\nFalse\n"


def test_warm_up_says_the_kernels_cannot_load(tmp_path):
    done = subprocess.run([sys.executable, "-m", "agefast", "--warm-up"], env=simulated(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("agefast: payload engine: cryptography; ")
    assert done.stderr.count("\n") == 1


def test_api_command_and_data_tests_pass_on_the_simulated_platform(tmp_path):
    # Costs about as long as those files take in the normal run (minutes): they are most of the suite's
    # API and command tests.
    files = [str(ROOT / "tests" / name) for name in API + COMMANDS + DATA]
    deselected = [f"--deselect={name}" for name in DESELECTED]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *deselected, *files],
                          cwd=ROOT, env=simulated(tmp_path), capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-5000:]
    skips = re.findall(r"^SKIPPED \[\d+\] (.*)$", done.stdout, re.MULTILINE)
    assert all(SKIPS.search(skip) for skip in skips), skips
