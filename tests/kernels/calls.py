"""Bytes-in, bytes-out calls into the private single-message kernels."""

import numpy as np

from agefast.kernels import _engine


def arr(data) -> np.ndarray:
    return np.frombuffer(bytearray(data), np.uint8)


def chacha20(key: bytes, counter: int, nonce: bytes, data: bytes) -> bytes:
    out = np.zeros(len(data), np.uint8)
    _engine._chacha20(arr(key), arr(nonce), counter, arr(data), out)
    return out.tobytes()


def poly1305(key: bytes, msg: bytes) -> bytes:
    out = np.zeros(16, np.uint8)
    _engine._poly1305(arr(key), arr(msg), out)
    return out.tobytes()


def aead_seal(key: bytes, nonce: bytes, plaintext: bytes, aad: bytes = b"") -> bytes:
    out = np.zeros(len(plaintext) + 16, np.uint8)
    _engine._aead_seal(arr(key), arr(nonce), arr(aad), arr(plaintext), out)
    return out.tobytes()


def aead_open(key: bytes, nonce: bytes, sealed: bytes, aad: bytes = b""):
    """The plaintext, or None when the tag did not verify (then nothing was written)."""
    out = np.full(len(sealed) - 16, 0xA5, np.uint8)
    if _engine._aead_open(arr(key), arr(nonce), arr(aad), arr(sealed), out):
        return out.tobytes()
    assert not (out != 0xA5).any(), "unverified plaintext was written"
    return None
