"""Loading a verified build where the system has no memfd (macOS): from a new file in a folder only this account can write."""

import ctypes
import os
import stat

import pytest

from agefast.io import portable
from agefast.kernels import _cache, _known_answer, _native


@pytest.fixture(scope="module")
def cached_library():
    """The shared library of the kernels for this machine, from the kernel cache."""
    from agefast import kernels

    kernels.warm_up()      # fills the cache if it is cold
    entry = _cache.lookup(_cache.key())
    if entry is None or entry[0] != "so":
        pytest.skip("the kernel cache holds no shared library (no C compiler driver)")
    return entry[1]


def test_without_memfd_the_bytes_load_from_a_private_file_that_is_then_gone(monkeypatch, cached_library):
    monkeypatch.setattr(portable, "has_memfd", lambda: False)
    loaded = []
    real = ctypes.CDLL

    def recording(name, *args, **kwargs):
        folder = os.stat(os.path.dirname(name))
        loaded.append((name, stat.S_IMODE(folder.st_mode), folder.st_uid))
        with open(name, "rb") as f:
            assert f.read() == cached_library
        return real(name, *args, **kwargs)

    monkeypatch.setattr(ctypes, "CDLL", recording)
    functions = _native.load_library(cached_library, "agefast-kernels-test")
    _known_answer.check(functions, "this machine's")
    [(name, mode, owner)] = loaded
    assert not name.startswith("/proc/") and os.path.basename(name) == "agefast-kernels-test.so"
    assert mode == 0o700 and owner == os.geteuid()
    assert not os.path.exists(os.path.dirname(name))
