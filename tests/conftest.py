"""Shared fixtures: deterministic plaintexts, running the commands, a pty driver,
and the requires_tool and requires_root marks for tests that need a system tool
(Go `age`, `ssh-keygen`) or root, by the rule in required.py."""

import os
import random
import select
import signal
import subprocess
import sys
import termios
import time
from dataclasses import dataclass

import pytest

from pty_fcntl import fcntl
from required import REQUIRE_TOOLS, missing_tools, need_tools, not_root, unavailable


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "requires_tool(*names): needs these programs on PATH; skipped with the reason when one is "
                   "missing, failed instead under AGEFAST_REQUIRE_TOOLS=1")
    config.addinivalue_line(
        "markers", "requires_root(why): needs root; skipped with the reason otherwise, failed instead under "
                   "AGEFAST_REQUIRE_TOOLS=1")


def _unmet(item) -> str | None:
    """Why `item` cannot run here by its requires_tool and requires_root marks, if it cannot."""
    reasons = [missing_tools(mark.args) for mark in item.iter_markers("requires_tool")]
    reasons += [not_root(*mark.args) for mark in item.iter_markers("requires_root")]
    return next((reason for reason in reasons if reason is not None), None)


def pytest_collection_modifyitems(config, items):
    # Skipped at collection, so that the summary names each test.
    if REQUIRE_TOOLS:
        return
    for item in items:
        if (reason := _unmet(item)) is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_runtest_setup(item):
    # Under AGEFAST_REQUIRE_TOOLS=1: fails before the test's fixtures are set up.
    if (reason := _unmet(item)) is not None:
        unavailable(reason)


@pytest.fixture(scope="session")
def require_tool():
    """require_tool(*names) for fixtures: as the requires_tool mark, at the point of use."""
    return need_tools


@pytest.fixture
def engine_setting(monkeypatch):
    """engine_setting(value): AGEFAST_ENGINE for this test. agefast reads it
    once per process (agefast.payload.engine.forced): the setting is read
    again after each change and after the test. The simulated platform
    (tests/test_platform.py) has no kernels: a test that asks for them there
    is skipped, by the one reason that run accepts."""
    from agefast.payload import engine

    def setting(value: str) -> None:
        if value == "numba" and os.environ.get("AGEFAST_SIMULATE_PLATFORM"):
            pytest.skip("the simulated platform has no kernels")
        monkeypatch.setenv("AGEFAST_ENGINE", value)
        engine.forced.cache_clear()

    yield setting
    # Before monkeypatch restores the variable: the next job reads it then.
    engine.forced.cache_clear()


@pytest.fixture
def old_batch_buffers(monkeypatch):
    """old_batch_buffers(byte): every batch buffer the next jobs take first (agefast.io.batch_buffers) is
    one an earlier job left full of other bytes, here `byte` everywhere."""
    from agefast.io import batch_buffers
    from agefast.payload.rules import PIPELINE_BATCH, SEALED_CHUNK_SIZE

    # as large as any a job asks for: a sealed batch, the byte that tells whether it is the last, a page
    size = PIPELINE_BATCH * SEALED_CHUNK_SIZE + 1 + 4096

    def fill(byte: int) -> None:
        kept = [batch_buffers.take(size) for _ in range(batch_buffers.KEPT)]
        for buffer in kept:
            buffer[:] = bytes([byte]) * len(buffer)
        monkeypatch.setattr(batch_buffers, "_kept", kept)

    return fill


@pytest.fixture
def make_plaintext():
    """Deterministic pseudo-random bytes of a given size (seeded by the size)."""

    def make(size: int, seed: int = 0) -> bytes:
        return random.Random(f"agefast-{seed}-{size}").randbytes(size)

    return make


@pytest.fixture
def written_while_synced(monkeypatch):
    """written_while_synced(path): the next os.fsync, before it syncs, appends b"more" to `path` (a program
    still writing the input while a result is synced)."""
    def start(path):
        sync = os.fsync

        def fsync_while_written(fd):
            monkeypatch.setattr(os, "fsync", sync)
            with open(path, "ab") as writer:
                writer.write(b"more")
            sync(fd)
        monkeypatch.setattr(os, "fsync", fsync_while_written)
    return start


def _run_module(module: str, args, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("timeout", 300)
    if "input" not in kwargs and "stdin" not in kwargs:
        kwargs["stdin"] = subprocess.DEVNULL
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], **kwargs)


@pytest.fixture
def run_agefast():
    """Run `python -m agefast ARGS` (subprocess.run keywords pass through)."""
    return lambda *args, **kwargs: _run_module("agefast", args, **kwargs)


@pytest.fixture
def run_keygen():
    """Run `python -m agefast.cli.keygen ARGS`."""
    return lambda *args, **kwargs: _run_module("agefast.cli.keygen", args, **kwargs)


@pytest.fixture(scope="session")
def age_key(tmp_path_factory, require_tool):
    """An X25519 identity file written by the Go age-keygen, and its recipient."""
    require_tool("age-keygen")
    path = tmp_path_factory.mktemp("age-key") / "key.txt"
    subprocess.run(["age-keygen", "-o", path], check=True, capture_output=True)
    recipient = subprocess.run(["age-keygen", "-y", path], check=True, capture_output=True, text=True).stdout.strip()
    return path, recipient


@dataclass
class TtyResult:
    returncode: int
    # Everything the program wrote to the terminal (prompts, stderr, and
    # stdout too when stdout was the terminal).
    transcript: bytes


def _take_controlling_tty():
    # Runs in the child after setsid(): make the pty on fd 2 the controlling
    # terminal, so the program can open /dev/tty as age does. SIGINT and
    # SIGHUP start at their defaults, as in a shell's foreground, not as this
    # test run inherited them (ignored under nohup or by some job runners).
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    fcntl.ioctl(2, termios.TIOCSCTTY, 0)


def _run_with_tty(argv, replies=(), *, stdin=None, stdout=None, timeout=120) -> TtyResult:
    """Run `argv` with a fresh pseudo-terminal as its controlling terminal and stderr.

    `replies` are (prompt, answer) pairs: once `prompt` (bytes) appears on the
    terminal, `answer` and a newline are typed. `stdin` / `stdout` are paths;
    when None the terminal is used.
    """
    master, slave = os.openpty()
    files = []
    try:
        stdin_f = open(stdin, "rb") if stdin is not None else slave
        stdout_f = open(stdout, "wb") if stdout is not None else slave
        files = [f for f in (stdin_f, stdout_f) if f is not slave]
        proc = subprocess.Popen(list(map(str, argv)), stdin=stdin_f, stdout=stdout_f, stderr=slave,
                                start_new_session=True, preexec_fn=_take_controlling_tty)
    finally:
        os.close(slave)
        for f in files:
            f.close()
    pending = list(replies)
    transcript = bytearray()
    searched = 0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:
                break  # EIO: every copy of the slave side is closed, the program is done
            if not data:
                break
            transcript += data
            while pending and pending[0][0] in transcript[searched:]:
                prompt, answer = pending.pop(0)
                searched = transcript.index(prompt, searched) + len(prompt)
                os.write(master, answer.encode() + b"\n")
        else:
            proc.kill()
            raise TimeoutError(f"{argv[0]} did not finish in {timeout}s; terminal said {bytes(transcript)!r}")
        return TtyResult(proc.wait(timeout=timeout), bytes(transcript))
    finally:
        os.close(master)


@pytest.fixture
def tty_run():
    """_run_with_tty: run a program on a pseudo-terminal, answering its prompts."""
    return _run_with_tty


@pytest.fixture
def refusing_folder(tmp_path):
    """A folder that takes no new file but whose files stay writable (as a user's 0555 folder): mode 0555, or,
    for root, whom modes do not stop, the immutable attribute (a folder's, not its files')."""
    folder = tmp_path / "refusing"
    folder.mkdir()
    (folder / "out").write_bytes(b"old contents, longer than the new ones")
    if os.geteuid() == 0:
        chattr = subprocess.run(["chattr", "+i", str(folder)], capture_output=True)
        if chattr.returncode:
            pytest.skip(f"root, and chattr +i failed here: {chattr.stderr.decode().strip()}")
        yield folder
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    else:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)


@pytest.fixture
def bind_mounted_file(tmp_path):
    """(a file bind-mounted over another, which no rename can replace: EBUSY, as a docker -v FILE:FILE, the file
    it shows)."""
    source, target = tmp_path / "source", tmp_path / "target"
    source.write_bytes(b"old contents, longer than the new ones")
    target.write_bytes(b"")
    if os.geteuid() != 0:
        pytest.skip("a bind mount needs root")
    mount = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True)
    if mount.returncode:
        pytest.skip(f"mount --bind failed here: {mount.stderr.decode().strip()}")
    yield target, source
    subprocess.run(["umount", str(target)], check=True)
