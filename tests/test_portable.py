"""agefast.io.portable's fallbacks, each taken by hand on this machine; agefast.io.cpus without an affinity mask; the
commands without termios and fcntl."""

import errno
import os
import platform
import subprocess
import sys

import pytest

from agefast.io import cpus, portable
from agefast.kernels import _shipped

DATA = bytes(range(256)) * 40


@pytest.fixture
def data_fd(tmp_path):
    path = tmp_path / "data"
    path.write_bytes(DATA)
    fd = os.open(path, os.O_RDONLY)
    os.lseek(fd, 7, os.SEEK_SET)
    yield fd
    os.close(fd)


@pytest.mark.parametrize("missing", [(), ("_PREADV",), ("_PREADV", "pread")], ids=["preadv", "pread", "seek"])
def test_pread_into_reads_at_the_offset_and_leaves_the_position(monkeypatch, data_fd, missing):
    for name in missing:
        # without os.pread, portable.pread is the seek and read under a lock
        monkeypatch.setattr(portable, name, portable._pread_by_seeking if name == "pread" else None)
    buf = bytearray(1000)
    assert portable.pread_into(data_fd, memoryview(buf), 300) == 1000
    assert buf == DATA[300:1300]
    assert portable.pread_into(data_fd, memoryview(buf), len(DATA) - 10) == 10
    assert buf[:10] == DATA[-10:]
    assert portable.pread_into(data_fd, memoryview(buf), len(DATA)) == 0
    assert os.lseek(data_fd, 0, os.SEEK_CUR) == 7


def test_without_copy_file_range_the_copy_is_refused_as_unsupported(monkeypatch, data_fd):
    monkeypatch.delattr(os, "copy_file_range", raising=False)
    with pytest.raises(OSError) as e:
        portable.copy_file_range(data_fd, data_fd, 1, 0, 0)
    assert e.value.errno == errno.ENOSYS


def test_without_fcntl_no_flags_are_known_and_none_are_changed(monkeypatch, data_fd):
    assert portable.file_status_flags(data_fd) is not None
    monkeypatch.setattr(portable, "fcntl", None)
    assert portable.file_status_flags(data_fd) is None
    portable.clear_file_status_flags(data_fd, os.O_APPEND)
    assert not portable.has_memfd()


def test_without_an_affinity_mask_every_cpu_counts(monkeypatch):
    monkeypatch.delattr(os, "process_cpu_count", raising=False)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert cpus.count() == os.cpu_count()


def test_anonymous_memory_without_map_private_or_sysconf(monkeypatch):
    import mmap

    page = portable.page_size()
    monkeypatch.delattr(mmap, "MAP_PRIVATE")
    monkeypatch.delattr(os, "sysconf")
    assert portable.page_size() == page
    memory = portable.anonymous_memory(3 * page)
    assert len(memory) == 3 * page and memory[:] == bytes(3 * page)
    memory.close()


def test_the_commands_run_without_termios_or_fcntl(tmp_path):
    # Windows has neither: only a passphrase prompt needs a terminal's settings.
    (tmp_path / "in").write_bytes(b"plain")
    probe = ("import sys\n"
             "sys.modules['termios'] = sys.modules['fcntl'] = None\n"
             "from agefast.cli import age, keygen\n"
             "folder = sys.argv[1]\n"
             "assert keygen.main(['-o', folder + '/key']) == 0\n"
             "assert age.main(['-e', '-i', folder + '/key', '-o', folder + '/in.age', folder + '/in']) == 0\n"
             "assert age.main(['-d', '-i', folder + '/key', '-o', folder + '/out', folder + '/in.age']) == 0\n")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out").read_bytes() == b"plain"


def test_after_fork_in_child_runs_in_each_child_and_needs_no_fork(monkeypatch):
    seen = []
    portable.after_fork_in_child(lambda: seen.append(os.getpid()))
    pid = os.fork()
    if pid == 0:
        os._exit(0 if seen == [os.getpid()] else 1)
    assert os.waitpid(pid, 0)[1] == 0 and seen == []
    monkeypatch.delattr(os, "register_at_fork")
    portable.after_fork_in_child(lambda: None)     # Windows: nothing to register with


def test_the_machine_is_uname_s_and_platform_s_where_there_is_no_uname(monkeypatch):
    assert portable.machine() == os.uname().machine
    monkeypatch.delattr(os, "uname")     # Windows
    assert portable.machine() == platform.machine()
    # and no shipped class is chosen by a name no class has
    assert _shipped.choose("AMD64", frozenset(["avx2", "avx512f", "avx512ifma"]),
                           frozenset(c.name for c in _shipped.CLASSES)) is None
