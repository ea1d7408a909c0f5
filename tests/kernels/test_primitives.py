"""Bit-exact parity of the kernels with RFC 8439, the naive reference and cryptography."""

import os
import random

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.poly1305 import Poly1305

from . import calls, naive
from . import rfc8439 as V

FUZZ = int(os.environ.get("AGEFAST_KERNEL_FUZZ", "150"))
KEYS = {"zeros": bytes(32), "ones": b"\xff" * 32, "ramp": bytes(range(32)),
        "bits": bytes((1 << (i % 8)) for i in range(32))}


def ref_chacha20(key, counter, nonce, data):
    return Cipher(algorithms.ChaCha20(key, counter.to_bytes(4, "little") + nonce), None).encryptor().update(data)


def test_rfc_block():
    assert calls.chacha20(V.BLOCK_KEY, 1, V.BLOCK_NONCE, bytes(64)) == V.BLOCK_OUT
    assert naive.chacha20_block(V.BLOCK_KEY, 1, V.BLOCK_NONCE) == V.BLOCK_OUT


def test_rfc_encryption():
    assert calls.chacha20(V.ENC_KEY, 1, V.ENC_NONCE, V.SUNSCREEN) == V.ENC_OUT
    assert naive.chacha20(V.ENC_KEY, 1, V.ENC_NONCE, V.SUNSCREEN) == V.ENC_OUT


def test_rfc_poly1305():
    assert calls.poly1305(V.POLY_KEY, V.POLY_MSG) == V.POLY_TAG
    assert naive.poly1305(V.POLY_KEY, V.POLY_MSG) == V.POLY_TAG


def test_rfc_aead():
    sealed = V.AEAD_CT + V.AEAD_TAG
    assert calls.aead_seal(V.AEAD_KEY, V.AEAD_NONCE, V.SUNSCREEN, V.AEAD_AAD) == sealed
    assert naive.aead_seal(V.AEAD_KEY, V.AEAD_NONCE, V.SUNSCREEN, V.AEAD_AAD) == sealed
    assert calls.aead_open(V.AEAD_KEY, V.AEAD_NONCE, sealed, V.AEAD_AAD) == V.SUNSCREEN
    assert calls.aead_open(V.AEAD_KEY, V.AEAD_NONCE, sealed, V.AEAD_AAD[:-1]) is None


def test_small_lengths_match_naive():
    # the naive reference is slow: a few lengths across the 16- and 64-byte edges
    rng = random.Random(1)
    key, nonce = rng.randbytes(32), rng.randbytes(12)
    for n in (0, 1, 15, 16, 17, 63, 64, 65, 129):
        data = rng.randbytes(n)
        assert calls.chacha20(key, 3, nonce, data) == naive.chacha20(key, 3, nonce, data)
        assert calls.poly1305(key, data) == naive.poly1305(key, data)
        assert calls.aead_seal(key, nonce, data, data[:5]) == naive.aead_seal(key, nonce, data, data[:5])


def test_every_length_to_1100():
    rng = random.Random(2)
    key, nonce = rng.randbytes(32), rng.randbytes(12)
    aead = ChaCha20Poly1305(key)
    data = rng.randbytes(1100)
    for n in range(1101):
        msg = data[:n]
        assert calls.chacha20(key, 1, nonce, msg) == ref_chacha20(key, 1, nonce, msg), n
        assert calls.poly1305(key, msg) == Poly1305.generate_tag(key, msg), n
        sealed = aead.encrypt(nonce, msg, None)
        assert calls.aead_seal(key, nonce, msg) == sealed, n
        assert calls.aead_open(key, nonce, sealed) == msg, n


def test_random_lengths_to_200k():
    rng = random.Random(3)
    for _ in range(FUZZ):
        n = rng.randrange(200 * 1024)
        key, nonce, aad = rng.randbytes(32), rng.randbytes(12), rng.randbytes(rng.choice((0, 0, 7, 40)))
        msg = rng.randbytes(n)
        sealed = ChaCha20Poly1305(key).encrypt(nonce, msg, aad or None)
        assert calls.aead_seal(key, nonce, msg, aad) == sealed, n
        assert calls.aead_open(key, nonce, sealed, aad) == msg, n
        assert calls.poly1305(key, msg) == Poly1305.generate_tag(key, msg), n


@pytest.mark.parametrize("name", sorted(KEYS))
def test_extreme_keys(name):
    key = KEYS[name]
    for nonce in (bytes(12), b"\xff" * 12):
        for n in (0, 1, 255, 1024, 4097, 65536):
            msg = bytes((i * 7) & 0xFF for i in range(n))
            assert calls.aead_seal(key, nonce, msg) == ChaCha20Poly1305(key).encrypt(nonce, msg, None)
            assert calls.poly1305(key, msg) == Poly1305.generate_tag(key, msg)
            ff = b"\xff" * n
            assert calls.poly1305(key, ff) == Poly1305.generate_tag(key, ff)


def test_the_join_of_two_chains():
    # _poly_mul joins the stitched loop's two chains (h_A r^k + h_B) and makes r^k (_poly_power): any
    # partially reduced operands (top words up to 7: the largest a step or a join leaves is 4), r^k
    # not clamped; the result is partially reduced too, its top word below 5 as a step's input needs.
    p = 2**130 - 5
    top = 2**131 - 1
    rng = random.Random(46)
    cases = [(top, top, top), (top, 0, top), (p, p - 1, 0), (2**128, 2**130, 2**130 - 1)]
    cases += [tuple(rng.randrange(2**131) for _ in range(3)) for _ in range(200)]
    for a, q, c in cases:
        r = rng.randrange(2**128)
        e = rng.randrange(1, 70)
        product, power = calls.poly_mul(a, q, c, r, e)
        assert product % p == (a * q + c) % p and product >> 128 < 5, (a, q, c)
        assert power % p == pow(r, e, p) and power >> 128 < 5, (r, e)


def test_unaligned_views():
    rng = np.random.default_rng(4)
    key, nonce = rng.bytes(32), rng.bytes(12)
    aead = ChaCha20Poly1305(key)
    src_buf = rng.integers(0, 256, 8192, dtype=np.uint8)
    dst_buf = np.zeros(8192, np.uint8)
    back_buf = np.zeros(8192, np.uint8)
    for off in range(1, 64):
        n = 2 * 1024 + 3 * off      # lane groups, a 1 KiB slice and a tail
        src = src_buf[off:off + n]
        dst = dst_buf[64 - off:64 - off + n + 16]
        calls.aead_seal_kernel(calls.arr(key), calls.arr(nonce), calls.arr(b""), src, dst)
        sealed = aead.encrypt(nonce, src.tobytes(), None)
        assert dst.tobytes() == sealed, off
        back = back_buf[off + 1:off + 1 + n]
        assert calls.aead_open_kernel(calls.arr(key), calls.arr(nonce), calls.arr(b""), dst, back)
        assert back.tobytes() == src.tobytes(), off


def test_tampered_message_is_rejected_without_output():
    rng = random.Random(5)
    key, nonce = rng.randbytes(32), rng.randbytes(12)
    for n in (0, 100, 5000):
        sealed = bytearray(ChaCha20Poly1305(key).encrypt(nonce, rng.randbytes(n), None))
        for bit in (0, 8 * len(sealed) - 1, rng.randrange(8 * len(sealed))):
            bad = bytearray(sealed)
            bad[bit // 8] ^= 1 << (bit % 8)
            assert calls.aead_open(key, nonce, bytes(bad)) is None
