"""Constant time, checked by a machine: every kernel build this host runs, under Valgrind's memcheck.

harness.c loads a build's shared library (build_kernels.compile, the way a
wheel's prebuilt/<class>.so is made) through its C ABI and calls each entry
that touches secrets (seal and open of one chunk, of a batch, and the file
kernel) with the key, the plaintext and the sealed chunks with their tags
marked undefined; memcheck reports every branch and every address computed
from them but the one the kernels declassify, each chunk's verdict
(_common._verdict). leaks.py puts a known leak into the same kernels, and the
check must report it.

Valgrind decodes no AVX-512 (3.19 in Debian 12): the AVX-512 classes are
checked as their code lowered for AVX2 (tests/kernels/lowered.py), the
code each class chooses (lane widths, forms, IFMA's radix 2^44 with the
vpmadd52 stand-ins) but not the instructions LLVM selects for AVX-512.
Each build is compiled once per session (~6-10 s), each memcheck run ~2 s.
"""

import os
import platform
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agefast.kernels import _abi
from required import unavailable
from tests.kernels import builds

ROOT = Path(__file__).resolve().parents[2]
_BUILDS = [(c, f) for c, f in builds.BUILDS if c.machine == "x86_64"]
_IDS = [i for (c, _), i in zip(builds.BUILDS, builds.IDS) if c.machine == "x86_64"]
# memcheck's error headlines, the first line of each report
_NOT_CONSTANT = {"branch": "Conditional jump or move depends on uninitialised value(s)",
                 "address": "Use of uninitialised value of size 8"}

pytestmark = [
    pytest.mark.requires_tool("valgrind", "cc"),
    pytest.mark.skipif(platform.machine() != "x86_64",
                       reason="the kernels declassify their verdict for memcheck on x86-64 only (_common._verdict)"),
]


@pytest.fixture(scope="session")
def harness(tmp_path_factory):
    out = tmp_path_factory.mktemp("constant-time") / "harness"
    cc = shlex.split(os.environ.get("CC") or "cc")
    done = subprocess.run([*cc, "-O1", "-g", "-rdynamic", "-o", str(out), str(Path(__file__).with_name("harness.c")),
                           "-ldl", "-lpthread"], capture_output=True, text=True)
    if done.returncode != 0 and "memcheck.h" in done.stderr:
        unavailable("needs Valgrind's headers (valgrind/memcheck.h: Debian's valgrind package)")
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="session")
def library(tmp_path_factory):
    """build(cpu_class, form, leak=""): the path of that build's shared library, compiled once per session."""
    made = {}

    def build(cpu_class, form, leak=""):
        if (cpu_class, form, leak) not in made:
            where = tmp_path_factory.mktemp("kernels")
            out = where / "kernels.so"
            if builds.runs_lowered(cpu_class):
                head, target = builds.lowered_head(cpu_class), builds.AVX2
            elif cpu_class.features == builds.AVX2.features and builds.runs_natively(cpu_class):
                head, target = "", cpu_class
            else:
                pytest.skip(f"Valgrind cannot run the {cpu_class.name} build here")
            if leak:
                head += f"from tests.constant_time import leaks\nleaks.inject({leak!r})\n"
            script = head + textwrap.dedent(f"""
                from build_kernels.compile import main
                main({str(out)!r})
            """)
            env = dict(os.environ, NUMBA_CACHE_DIR=str(where / "numba"), AGEFAST_KERNEL_FORM=form or cpu_class.form,
                       **builds.target_env(target))
            done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=600)
            assert done.returncode == 0, done.stderr[-3000:]
            made[cpu_class, form, leak] = out
        return made[cpu_class, form, leak]

    return build


def memcheck(harness, library):
    """(what the harness printed, the headline of each error memcheck reported) of one run over `library`."""
    sizes = (_abi.SCRATCH_SIZE, _abi.FILE_BUFFER_SIZE, _abi.FILE_BATCH, _abi.MUTEX_SIZE)
    done = subprocess.run(["valgrind", "--tool=memcheck", "--error-exitcode=99", "--leak-check=no",
                           str(harness), str(library), *map(str, sizes)],
                          capture_output=True, text=True, timeout=600)
    lines = done.stderr.splitlines()
    headlines = [re.sub(r"^==\d+== ", "", line) for line, after in zip(lines, lines[1:])
                 if re.match(r"==\d+==    at 0x", after) and not re.match(r"==\d+==    (at|by) 0x", line)]
    summary = re.search(r"ERROR SUMMARY: (\d+) errors", done.stderr)
    assert summary, done.stderr[-3000:]
    assert (done.returncode == 99) == (int(summary[1]) > 0), done.stderr[-3000:]
    assert done.returncode in (0, 99), done.stdout + done.stderr[-3000:]
    return done.stdout, headlines


def _every_entry_ran(out):
    assert out.count("ok ") == 9 and "WRONG" not in out, out


@pytest.mark.parametrize(("cpu_class", "form"), _BUILDS, ids=_IDS)
def test_constant_time_of_each_build(harness, library, cpu_class, form):
    out, errors = memcheck(harness, library(cpu_class, form))
    _every_entry_ran(out)
    assert errors == [], "\n".join(errors)


@pytest.mark.parametrize(("leak", "report"), [("early exit", "branch"), ("table", "address")])
def test_constant_time_check_finds_a_leak(harness, library, leak, report):
    # The avx2 class as it ships (stitched), with one leak put in: the
    # kernels still seal and open right, and memcheck reports the leak.
    out, errors = memcheck(harness, library(builds.AVX2, "", leak))
    _every_entry_ran(out)
    assert _NOT_CONSTANT[report] in errors, "\n".join(errors)
