"""One chunk at a time against cryptography, for whichever build of the kernels the process loaded.

Run in process (test_stitched.py) and in each class's build in a subprocess
(test_subprocess.py), so the stitched kernel is checked in CI whatever the
CI machine's CPU, and the AVX-512 builds wherever it has AVX-512.
"""

import random

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from agefast import kernels

CHUNK = kernels.CHUNK_SIZE
# every edge of the stitched loop (512-byte steps, the KiB sealed before it) and of a chunk
LENGTHS = (0, 1, 15, 16, 17, 63, 64, 511, 512, 513, 1023, 1024, 1025, 1535, 1536, 1537, 2047, 2048,
           CHUNK - 513, CHUNK - 512, CHUNK - 1, CHUNK)
FILL = 0xA5
# batches of 1-3 chunks: the bridge between chunks (stitched), the last chunk whole, short of one
# 512-byte step or past it, and the empty batch
BATCHES = (0, 100, CHUNK, CHUNK + 100, CHUNK + 511, CHUNK + 512, 2 * CHUNK, 2 * CHUNK + 1, 3 * CHUNK - 1,
           3 * CHUNK)


# Around every output buffer: a kernel that writes a byte before or past its
# output changes one of them (_untouched).
GUARD = 0x5C
MARGIN = 64


def _at(data, offset):
    """A buffer holding `data` that starts `offset` bytes into its allocation (any alignment)."""
    buf = bytearray(offset) + bytearray(data)
    return memoryview(buf)[offset:offset + len(data)]


def _output(n, offset, fill=0):
    """An output buffer of `n` bytes of `fill`, `offset` bytes into its
    allocation (any alignment), between MARGIN or more bytes of GUARD."""
    buf = bytearray([GUARD]) * (MARGIN + offset) + bytearray([fill]) * n + bytearray([GUARD]) * MARGIN
    return memoryview(buf)[MARGIN + offset:MARGIN + offset + n]


def _untouched(out) -> bool:
    """Whether every byte around `out` (made by _output) still holds GUARD."""
    whole = out.obj
    end = len(whole) - MARGIN
    return whole[:end - len(out)] + whole[end:] == bytes([GUARD]) * (len(whole) - len(out))


def check_chunks(rng: random.Random, stitched: bool, random_lengths: int = 30) -> int:
    """Seal and open single chunks of many lengths, at odd offsets, final and not, and tampered.

    A tampered chunk must leave its part of dst all zeros (stitched: it was
    decrypted while hashed, then wiped) or untouched (two passes: never
    written). Returns the number of chunks checked.
    """
    key = rng.randbytes(32)
    aead = ChaCha20Poly1305(key)
    lengths = LENGTHS + tuple(rng.randrange(CHUNK + 1) for _ in range(random_lengths))
    for i, n in enumerate(lengths):
        counter = rng.choice((0, 7, 0xFFFFFF, (1 << 64) - 1))
        final = n != CHUNK or i % 2 == 0      # a non-final chunk must be whole
        nonce = counter.to_bytes(11, "big") + bytes([final])
        plain = rng.randbytes(n)
        expect = aead.encrypt(nonce, plain, None)
        sealed = _output(len(expect), i % 8)
        assert kernels.seal_chunks(key, counter, _at(plain, (i + 3) % 8), sealed, final, threads=1) == len(expect)
        assert sealed == expect and _untouched(sealed), (n, i)
        back = _output(n, (i + 5) % 8, FILL)
        assert kernels.open_chunks(key, counter, _at(expect, (i + 1) % 8), back, final, threads=1) == 1
        assert back == plain and _untouched(back), (n, i)
        bad = bytearray(expect)
        bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
        back = _output(n, i % 8, FILL)
        assert kernels.open_chunks(key, counter, bytes(bad), back, final, threads=1) == 0
        left = bytes(n) if stitched else bytes([FILL]) * n
        assert back == left and _untouched(back), (n, i)
    return len(lengths)


def _nonce(counter: int, final: bool) -> bytes:
    return counter.to_bytes(11, "big") + bytes([final])


def check_batches(rng: random.Random, stitched: bool) -> int:
    """Seal and open batches of several chunks in one call (threads=1), at odd offsets, final and not,
    against cryptography chunk by chunk; then one chunk tampered: the chunks before it open, its part
    of dst is all zeros (stitched) or untouched (two passes), and nothing after it is touched.
    Returns the number of batches checked."""
    key = rng.randbytes(32)
    aead = ChaCha20Poly1305(key)
    for i, n in enumerate(BATCHES):
        final = n % CHUNK != 0 or n == 0 or i % 2 == 0      # a non-final batch holds whole chunks
        chunks = max(1, -(-n // CHUNK))
        # carries across the nonce's 32-bit words, and the last chunk numbered 2**64 - 1
        counter = rng.choice((0, 7, (1 << 32) - 2, (1 << 64) - chunks))
        plain = rng.randbytes(n)
        expect = b"".join(aead.encrypt(_nonce(counter + k, final and k == chunks - 1), plain[k * CHUNK:(k + 1) * CHUNK],
                                       None) for k in range(chunks))
        sealed = _output(len(expect), i % 8)
        assert kernels.seal_chunks(key, counter, _at(plain, (i + 3) % 8), sealed, final, threads=1) == len(expect)
        assert sealed == expect and _untouched(sealed), (n, i)
        back = _output(n, (i + 5) % 8, FILL)
        assert kernels.open_chunks(key, counter, _at(expect, (i + 1) % 8), back, final, threads=1) == chunks
        assert back == plain and _untouched(back), (n, i)
        bad = bytearray(expect)
        hit = rng.randrange(len(bad))
        bad[hit] ^= 1 << rng.randrange(8)
        failed = hit // (CHUNK + 16)
        back = _output(n, i % 8, FILL)
        assert kernels.open_chunks(key, counter, bytes(bad), back, final, threads=1) == failed
        start, stop = failed * CHUNK, min((failed + 1) * CHUNK, n)
        assert back[:start] == plain[:start], (n, i)
        assert back[start:stop] == (bytes(stop - start) if stitched else bytes([FILL]) * (stop - start)), (n, i)
        assert back[stop:] == bytes([FILL]) * (n - stop) and _untouched(back), (n, i)
    return len(BATCHES)
