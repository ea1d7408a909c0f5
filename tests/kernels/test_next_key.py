"""The next chunk's Poly1305 key made beside a chunk's IFMA lanes (_next_key), against cryptography's
ChaCha20 and big-integer powers of r; the lanes beside it as _poly_lanes alone leaves them."""

import random

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from agefast.kernels import _next_key, _stitched
from agefast.kernels._common import GROUP, LANES

from . import calls

P = (1 << 130) - 5


def expected(key, words, join):
    """(r, s, r^1..r^16, r^join mod p) of ChaCha20 block 0 under key and nonce words 13..15."""
    nonce = b"".join(w.to_bytes(4, "little") for w in words)
    block = Cipher(algorithms.ChaCha20(key, bytes(4) + nonce), None).encryptor().update(bytes(32))
    r = int.from_bytes(block[:16], "little") & 0x0FFFFFFC0FFFFFFC0FFFFFFC0FFFFFFF
    return r, int.from_bytes(block[16:], "little"), [pow(r, k, P) for k in range(1, LANES + 1)], pow(r, join, P)


def found(nk):
    """The same read from the next-key words, each power from the lanes' limbs of lane 16-k."""
    def word(i, n):
        return sum(int(nk[i + j]) << (64 * j) for j in range(n))
    powers = []
    for k in range(1, LANES + 1):
        lim = [int(nk[_next_key.POWERS_AT + LANES * row + LANES - k]) for row in range(5)]
        assert lim[3] == 20 * lim[1] and lim[4] == 20 * lim[2] and max(lim[:2]) < 1 << 44
        powers.append((lim[0] + (lim[1] << 44) + (lim[2] << 88)) % P)
    return word(0, 2), word(2, 2), powers, word(4, 3) % P


CASES = [(bytes(32), (0, 0, 1), 28), (b"\xff" * 32, (0xFFFFFFFF,) * 3, 17), (bytes(range(32)), (0, 0, 0x100), 32)]
CASES += [(random.Random(i).randbytes(32), tuple(random.Random(i).getrandbits(32) for _ in range(3)), 17 + i)
          for i in range(15)]


@pytest.mark.skipif(not _stitched.NEXT_KEY, reason="this CPU's build has no IFMA lanes: no key is made beside them")
@pytest.mark.parametrize("key, words, join", CASES)
def test_key_made_beside_the_lanes(key, words, join):
    rng = random.Random(join)
    msg = np.frombuffer(rng.randbytes(GROUP * (_next_key.BESIDE + rng.randrange(12))), np.uint8)
    lanes = np.zeros((2, 5 * LANES), np.uint64)
    nk = np.zeros(96, np.uint64)
    calls.lanes_beside_key_kernel(calls.arr(key), np.array(words, np.uint32), msg, join, lanes, nk)
    assert found(nk) == expected(key, words, join)
    assert np.array_equal(lanes[0], lanes[1])


@pytest.mark.parametrize("key, words, join", CASES[:4])
def test_the_stand_in_without_jit(key, words, join):
    # NUMBA_DISABLE_JIT=1 runs _py_lanes_beside_key in the intrinsic's place; here it is called as is.
    st = np.zeros(16, np.uint32)
    st[4:12] = np.frombuffer(key, "<u4")
    nk = np.zeros(96, np.uint64)
    hl = np.zeros(5 * LANES, np.uint64)
    pw = np.zeros(9 * LANES, np.uint64)
    _next_key._py_lanes_beside_key(hl, pw, np.zeros(GROUP, np.uint8), 0, 1, st, np.array(words, np.uint32), nk, join)
    assert found(nk) == expected(key, words, join)
