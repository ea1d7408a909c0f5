"""The single-message kernels (RFC 8439 ChaCha20, Poly1305, ChaCha20-Poly1305), built
from the batch kernels' parts, and bytes-in, bytes-out calls into them. Only
the tests use them.

Numba's on-disk cache keys a function on its own file's timestamp and does
not notice an edit to a callee in another module (a stale cache once ran
old code), and every kernel these call lives in agefast/kernels/. So their
cache entries are keyed on the hash of the kernel sources, the list the
compiled batch kernel's cache key covers (agefast.kernels._cache._SOURCES),
and kept where Numba keeps the user's caches (NUMBA_CACHE_DIR, else
~/.cache/numba), only in a folder no other account can write, never in the
source tree.
"""

import hashlib
import os

import numpy as np
from numba import njit
from numba.core import caching

from agefast.kernels import _cache
from agefast.kernels._aead import _open_one, _scratch, _seal_one
from agefast.kernels._chacha20 import _chacha20_xor, _set_key
from agefast.kernels._common import _copy, _fill, _inner, _le32, GROUP, LANE_MIN
from agefast.kernels._next_key import _lanes_beside_key
from agefast.kernels._poly1305 import (_poly_begin, _poly_blocks, _poly_fold, _poly_lanes, _poly_mul, _poly_power,
                                       _poly_tag)


def _kernel_sources() -> str:
    h = hashlib.sha256()
    for name in _cache._SOURCES:
        with open(os.path.join(os.path.dirname(_cache.__file__), name), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


class _Trusted:
    """Keyed on the kernel sources, and in a folder only where no other account can write.

    Numba loads pickles and machine code from its cache: a folder another
    account can write into (a shared NUMBA_CACHE_DIR, say) would run that
    account's code in this process. The folder is created 0700 and must pass
    agefast's own cache checks (_cache.path_refusal), else this locator
    declines it, with one warning.
    """

    def get_source_stamp(self):
        return _kernel_sources()

    def ensure_cache_path(self):
        os.makedirs(self.get_cache_path(), 0o700, exist_ok=True)
        super().ensure_cache_path()
        why = _cache.path_refusal(self.get_cache_path())
        if why:
            _cache.warn_once(f"not using Numba's cache {why}")
            raise PermissionError(why)


class _UserProvided(_Trusted, caching.UserProvidedCacheLocator):
    pass


class _UserWide(_Trusted, caching.UserWideCacheLocator):
    pass


class _KernelCache(caching.FunctionCache):
    class _impl_class(caching.CompileResultCacheImpl):
        _locator_classes = [_UserProvided, _UserWide]


def _kernel(func):
    """As the batch kernels: GIL released, no boundscheck, no fastmath; cached as above."""
    dispatcher = njit(nogil=True)(func)
    try:
        dispatcher._cache = _KernelCache(func)      # what cache=True does, with these locators
    except RuntimeError:
        pass     # no trusted folder ("no locator available"): compiled in each process, cached nowhere
    return dispatcher


@_inner
def _set_nonce(st, nonce):
    """RFC 8439's 12-byte nonce into the state (the kernels make age's nonces from a counter: _age_nonce)."""
    for i in range(3):
        st[13 + i] = _le32(nonce, 4 * i)


@_kernel
def chacha20_kernel(key, nonce, counter, src, dst):
    """RFC 8439 ChaCha20 with a 12-byte nonce and 32-bit initial block counter."""
    scr = _scratch()
    st = scr[0]
    _set_key(st, key)
    _set_nonce(st, nonce)
    st[12] = np.uint32(counter)
    _chacha20_xor(st, src, dst, scr[5][1024:2048])


@_kernel
def poly1305_kernel(key, msg, out):
    """RFC 8439 Poly1305 of msg under a 32-byte one-time key; tag to out[:16]."""
    st, ctx, hl, pw16, pwfin, buf, _ = _scratch()
    groups = msg.size // GROUP if msg.size >= LANE_MIN else 0
    _poly_begin(ctx, hl, pw16, pwfin, key, 0, groups > 0)
    if groups:
        if groups > 1:
            _poly_lanes(hl, pw16, msg, 0, groups - 1)
        _poly_lanes(hl, pwfin, msg, GROUP * (groups - 1), 1)
        _poly_fold(ctx, hl)
    full = msg.size // 16
    _poly_blocks(ctx, msg, GROUP * groups, full - 16 * groups, 1)
    rem = msg.size - 16 * full
    if rem:
        blk = buf[2064:2080]
        _fill(blk, 16, np.uint8(0))
        _copy(blk, 0, msg, 16 * full, rem)
        blk[rem] = 1
        _poly_blocks(ctx, blk, 0, 1, 0)
    _poly_tag(ctx, out, 0)


@_kernel
def poly_mul_kernel(words, e, out):
    """out[0:3] = words[0:3] * words[3:6] + words[6:9] through _poly_mul; out[3:6] = r^e of
    r = words[9:11] through _poly_power (e an int64, as the build's constant is)."""
    out[0], out[1], out[2] = _poly_mul(words[0], words[1], words[2], words[3], words[4], words[5], words[6],
                                       words[7], words[8])
    out[3], out[4], out[5] = _poly_power(words[9], words[10], e)


@_kernel
def lanes_beside_key_kernel(key, words, msg, join, lanes, nk):
    """_next_key's lanes over msg (whole groups) under the powers of r from key[:16], beside them the
    Poly1305 key of ChaCha20 key `key` and nonce words `words` into nk; lanes[0] as they leave the lanes,
    lanes[1] as _poly_lanes alone leaves them."""
    st, ctx, hl, pw16, pwfin, buf, _ = _scratch()
    _set_key(st, key)
    _poly_begin(ctx, hl, pw16, pwfin, key, 0, True)
    lanes[1][:] = hl
    _poly_lanes(lanes[1], pw16, msg, 0, msg.size // GROUP)
    _lanes_beside_key(hl, pw16, msg, 0, msg.size // GROUP, st, (words[0], words[1], words[2]), nk, join)
    lanes[0][:] = hl


@_kernel
def aead_seal_kernel(key, nonce, aad, src, dst):
    """ChaCha20-Poly1305 seal of one message: dst = ciphertext || tag."""
    scr = _scratch()
    _set_key(scr[0], key)
    _set_nonce(scr[0], nonce)
    _seal_one(scr, aad, src, dst)


@_kernel
def aead_open_kernel(key, nonce, aad, src, dst):
    scr = _scratch()
    _set_key(scr[0], key)
    _set_nonce(scr[0], nonce)
    return _open_one(scr, aad, src, dst)


def arr(data) -> np.ndarray:
    return np.frombuffer(bytearray(data), np.uint8)


def chacha20(key: bytes, counter: int, nonce: bytes, data: bytes) -> bytes:
    out = np.zeros(len(data), np.uint8)
    chacha20_kernel(arr(key), arr(nonce), counter, arr(data), out)
    return out.tobytes()


def poly1305(key: bytes, msg: bytes) -> bytes:
    out = np.zeros(16, np.uint8)
    poly1305_kernel(arr(key), arr(msg), out)
    return out.tobytes()


def aead_seal(key: bytes, nonce: bytes, plaintext: bytes, aad: bytes = b"") -> bytes:
    out = np.zeros(len(plaintext) + 16, np.uint8)
    aead_seal_kernel(arr(key), arr(nonce), arr(aad), arr(plaintext), out)
    return out.tobytes()


def aead_open(key: bytes, nonce: bytes, sealed: bytes, aad: bytes = b""):
    """The plaintext, or None when the tag did not verify (then nothing was written)."""
    out = np.full(len(sealed) - 16, 0xA5, np.uint8)
    if aead_open_kernel(arr(key), arr(nonce), arr(aad), arr(sealed), out):
        return out.tobytes()
    assert not (out != 0xA5).any(), "unverified plaintext was written"
    return None


def _words(n: int) -> list[int]:
    return [n & (2**64 - 1), n >> 64 & (2**64 - 1), n >> 128]


def poly_mul(a: int, q: int, c: int, r: int, e: int) -> tuple[int, int]:
    """(a * q + c, r^e), as _poly_mul and _poly_power leave them (partially reduced: not below 2^130-5
    always) for a, q, c below 2^131 and r below 2^128."""
    out = np.zeros(6, np.uint64)
    poly_mul_kernel(np.array(_words(a) + _words(q) + _words(c) + _words(r)[:2], np.uint64), e, out)
    w = [int(v) for v in out]
    return w[0] | w[1] << 64 | w[2] << 128, w[3] | w[4] << 64 | w[5] << 128
