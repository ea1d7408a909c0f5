"""agefast.kernels._known_answer: a build that seals or opens the known batch wrongly is never used."""

import ctypes
import hashlib
import warnings

import pytest
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from agefast import kernels
from agefast.kernels import _abi, _known_answer, _loader, _native


def test_the_known_answer_is_cryptographys():
    aead = ChaCha20Poly1305(_known_answer.KEY)
    plaintext, counter = _known_answer.PLAINTEXT, _known_answer.COUNTER
    sealed = (aead.encrypt(counter.to_bytes(11, "big") + b"\x00", plaintext[:_abi.CHUNK], None)
              + aead.encrypt((counter + 1).to_bytes(11, "big") + b"\x01", plaintext[_abi.CHUNK:], None))
    assert len(sealed) == _known_answer.SEALED_SIZE
    assert hashlib.sha256(sealed).hexdigest() == _known_answer.SEALED_SHA256


def _real():
    kernels.warm_up()
    return _loader.functions()


def test_the_loaded_build_gives_it():
    _known_answer.check(_real(), kernels.isa())


def _seals_zeros(call):
    _, _, _, n, dst, m, _, mode = _native.batch_arguments(call)
    ctypes.memmove(dst, bytes(m), m)
    return n + 2 * _abi.TAG if mode == _abi.SEAL else 2


def _opens_anything(real):
    def batch(call):
        _, _, _, n, _, _, _, mode = _native.batch_arguments(call)
        done = real.batch(call)
        return -(-n // (_abi.CHUNK + _abi.TAG)) if mode == _abi.OPEN else done
    return batch


@pytest.mark.parametrize("wrong", ["seals zeros", "opens a forged chunk"])
def test_a_wrong_build_is_refused_and_the_jobs_stay_on_cryptography(monkeypatch, wrong):
    real = _real()
    batch = _seals_zeros if wrong == "seals zeros" else _opens_anything(real)
    fake = real._replace(batch=batch)
    with pytest.raises(_known_answer.WrongAnswer):
        _known_answer.check(fake, "a test's")
    # Loaded as the process's kernels: refused with a warning, never used.
    monkeypatch.setattr(_loader, "_load", lambda: (fake, "avx2"))
    monkeypatch.setattr(_loader, "_functions", None)
    monkeypatch.setattr(_loader, "_unloadable", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _loader.load_or_warn() is False
    assert any("wrongly on this CPU" in str(w.message) for w in caught)
    assert _loader._functions is None


@pytest.mark.parametrize("value, disabled", [("1", True), (" 2 ", True), ("0", False), ("", False),
                                             ("true", False), ("yes", False)])
def test_numba_disable_jit_is_read_as_numba_reads_it(monkeypatch, value, disabled):
    # "true" had sent agefast down the reference route (no known-answer check) while Numba, which reads an int
    # and takes anything else for 0, compiled: every large job then failed on an intrinsic run as Python.
    monkeypatch.setenv("NUMBA_DISABLE_JIT", value)
    assert _loader._jit_disabled() is disabled
