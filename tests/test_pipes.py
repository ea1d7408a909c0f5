"""The command's piped input and output get 1 MiB pipes (agefast.io.pipes)."""

import fcntl
import os
import subprocess
import sys
import threading

import pytest

import agefast
from agefast.io import pipes

needs_linux = pytest.mark.skipif(not hasattr(fcntl, "F_GETPIPE_SZ"), reason="F_GETPIPE_SZ is Linux's")


@needs_linux
def test_the_command_widens_a_piped_input():
    identity = agefast.x25519.Identity.generate()
    data = os.urandom(3 << 20)
    r, w = os.pipe()
    try:
        assert fcntl.fcntl(r, fcntl.F_GETPIPE_SZ) < pipes.PIPE_SIZE
        proc = subprocess.Popen([sys.executable, "-m", "agefast", "-r", str(identity.to_public())],
                                stdin=r, stdout=subprocess.PIPE)

        def feed():
            with os.fdopen(w, "wb") as pipe:
                pipe.write(data)

        feeder = threading.Thread(target=feed)
        feeder.start()
        sealed, _ = proc.communicate(timeout=60)
        feeder.join()
        assert proc.returncode == 0
        # The parent's read end is the same pipe the command read.
        assert fcntl.fcntl(r, fcntl.F_GETPIPE_SZ) == pipes.PIPE_SIZE
    finally:
        os.close(r)
    assert agefast.decrypt(sealed, [identity]) == data


@needs_linux
def test_the_command_widens_a_piped_output(tmp_path):
    identity = agefast.x25519.Identity.generate()
    data = os.urandom(3 << 20)
    plain = tmp_path / "plain"
    plain.write_bytes(data)
    proc = subprocess.Popen([sys.executable, "-m", "agefast", "-r", str(identity.to_public()), str(plain)],
                            stdout=subprocess.PIPE)
    try:
        assert fcntl.fcntl(proc.stdout.fileno(), fcntl.F_GETPIPE_SZ) < pipes.PIPE_SIZE
        sealed = proc.stdout.read()
        # The parent's read end is the pipe the command wrote.
        assert fcntl.fcntl(proc.stdout.fileno(), fcntl.F_GETPIPE_SZ) == pipes.PIPE_SIZE
    finally:
        proc.stdout.close()
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert agefast.decrypt(sealed, [identity]) == data


@needs_linux
def test_anything_but_a_pipe_is_left_alone(tmp_path):
    with open(tmp_path / "file", "wb") as f:
        pipes.widen(f.fileno())
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    pipes.widen(r)     # closed: EBADF, ignored
