"""Fixtures for the perfprof tests."""

import subprocess
import sys
import time

import pytest

# Lowers RLIMIT_NOFILE and takes descriptors until only FREE are left.
_FEW_FDS = """
import os, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
held = []
while True:
    try:
        held.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        break
for fd in held[:FREE]:
    os.close(fd)
"""


def burn_cpu(seconds):
    # CPU time of this thread, not wall time: task-clock counts the former,
    # and other processes on a busy machine would widen the gap.
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@pytest.fixture
def spin():
    """A function spending `seconds` of the calling thread's CPU time."""
    return burn_cpu


@pytest.fixture
def run_with_free_fds():
    """Run Python source in a child interpreter, after its imports, with n descriptors left."""

    def run(imports, source, n):
        program = "\n".join([imports, _FEW_FDS.replace("FREE", str(n)), source])
        return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)

    return run
