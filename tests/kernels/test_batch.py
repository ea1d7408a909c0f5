"""Batched seal/open: identical to agefast.payload.engine's cryptography path, tamper handling, allocation."""

import random
import sys

import pytest

from agefast.errors import EngineError
from agefast.payload import rules
from agefast.payload.engine import choose
from agefast import kernels

CHUNK = kernels.CHUNK_SIZE
SEALED = kernels.SEALED_CHUNK_SIZE
TAG = kernels.TAG_SIZE
KEY = bytes(range(100, 132))
SIZES = (0, 1, 15, 16, 17, 1023, 1024, 4096, CHUNK - 1, CHUNK, CHUNK + 1,
         2 * CHUNK - 17, 2 * CHUNK, 2 * CHUNK + 1, 3 * CHUNK + 1000)
COUNTERS = (0, 0xFFFFFF, (1 << 56) - 2)     # carries across the nonce's 32-bit words


@pytest.fixture(autouse=True)
def cryptography_reference(engine_setting):
    # agefast.payload.engine is the reference here: keep it on its cryptography path
    engine_setting("cryptography")


# Each batch on 1 or 2 threads in ranges as in use (one a thread for these few chunks), and on 2 or 3
# threads in ranges of one chunk, which the threads take in turn (_batches.SPAN_MIN_CHUNKS).
THREADS = [pytest.param(1, None, id="1"), pytest.param(2, None, id="2"),
           pytest.param(2, 1, id="2-ranges-of-1"), pytest.param(3, 1, id="3-ranges-of-1")]


def ranges_of(monkeypatch, chunks):
    if chunks is not None:
        from agefast.kernels import _batches

        monkeypatch.setattr(_batches, "SPAN_MIN_CHUNKS", chunks)


def reference_seal(counter, src, final):
    dst = bytearray(rules.sealed_size(len(src)))
    return bytes(dst[:choose(None, None).seal(KEY, counter, src, dst, final)])


@pytest.mark.parametrize(("threads", "span"), THREADS)
def test_final_batches_match_cryptography(monkeypatch, threads, span):
    ranges_of(monkeypatch, span)
    rng = random.Random(threads)
    for n in SIZES:
        counter = rng.choice(COUNTERS)
        src = rng.randbytes(n)
        expect = reference_seal(counter, src, True)
        dst = bytearray(len(expect) + 5)
        assert kernels.seal_chunks(KEY, counter, src, dst, True, threads=threads) == len(expect)
        assert bytes(dst[:len(expect)]) == expect and dst[len(expect):] == bytes(5), n
        back = bytearray(n)
        assert kernels.open_chunks(KEY, counter, expect, back, True, threads=threads) == max(1, -(-n // CHUNK))
        assert back == src, n


def _before_a_page_no_one_reads(n: int):
    """A writable buffer of `n` bytes that ends where a page begins that cannot be read or written: a byte read or
    written past it kills the process (SIGSEGV). Its mapping is kept alive by the view."""
    import ctypes
    import mmap

    import numpy as np

    pages = -(-n // mmap.PAGESIZE) + 1
    m = mmap.mmap(-1, (pages + 4) * mmap.PAGESIZE)
    end = pages * mmap.PAGESIZE
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mprotect(ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(m, end))),
                     ctypes.c_size_t(4 * mmap.PAGESIZE), 0) != 0:
        raise OSError(ctypes.get_errno(), "mprotect")
    return np.frombuffer(m, np.uint8)[end - n:end]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect through ctypes, on Linux")
@pytest.mark.parametrize("threads", [1, 2])
def test_no_byte_past_a_batch_s_buffers_is_read_or_written(threads):
    # The zmm loop prefetches its source 4 KiB ahead (_stitched._PREFETCH): a prefetch does not fault, a load
    # would. Each buffer ends at a page that cannot be read or written.
    rng = random.Random(threads)
    for n in (1000, CHUNK, 3 * CHUNK + 1000):
        plain = rng.randbytes(n)
        src = _before_a_page_no_one_reads(n)
        src[:] = memoryview(plain)
        expect = reference_seal(0, plain, True)
        sealed = _before_a_page_no_one_reads(len(expect))
        assert kernels.seal_chunks(KEY, 0, src, sealed, True, threads=threads) == len(expect)
        assert bytes(sealed) == expect
        back = _before_a_page_no_one_reads(n)
        assert kernels.open_chunks(KEY, 0, sealed, back, True, threads=threads) == -(-n // CHUNK)
        assert bytes(back) == plain


@pytest.mark.parametrize("threads", [1, 2])
def test_non_final_batches_match_cryptography(threads):
    rng = random.Random(10 + threads)
    for count in (1, 2, 3):
        src = rng.randbytes(count * CHUNK)
        for counter in COUNTERS:
            expect = reference_seal(counter, src, False)
            dst = bytearray(len(expect))
            assert kernels.seal_chunks(KEY, counter, src, dst, False, threads=threads) == len(expect)
            assert bytes(dst) == expect
            back = bytearray(len(src))
            assert kernels.open_chunks(KEY, counter, expect, back, False, threads=threads) == count
            assert back == src
            # the final flag is part of the nonce: a non-final batch does not open as final
            assert kernels.open_chunks(KEY, counter, expect, bytearray(len(src)), True, threads=threads) == count - 1


@pytest.mark.parametrize(("threads", "span"), THREADS)
def test_tampered_chunk_stops_open_and_dst_holds_only_verified_plaintext(monkeypatch, threads, span):
    from agefast.kernels import _common

    ranges_of(monkeypatch, span)
    rng = random.Random(20 + threads)
    n = 4 * CHUNK + 777
    src = rng.randbytes(n)
    sealed = reference_seal(5, src, True)
    for k in range(5):
        start = k * SEALED
        end = min(start + SEALED, len(sealed))
        for pos in (start, end - 1, rng.randrange(start, end)):   # ciphertext and tag bytes
            bad = bytearray(sealed)
            bad[pos] ^= 1 << rng.randrange(8)
            dst = bytearray(b"\xa5" * n)
            assert kernels.open_chunks(KEY, 5, bytes(bad), dst, True, threads=threads) == k
            assert dst[:k * CHUNK] == src[:k * CHUNK]
            untouched = [b"\xa5" * len(src[j * CHUNK:(j + 1) * CHUNK]) for j in range(5)]
            # the failed chunk: wiped where it was decrypted while hashed (stitched), else never written
            failed = bytes(len(untouched[k])) if _common.STITCHED else untouched[k]
            assert dst[k * CHUNK:(k + 1) * CHUNK] == failed
            for j in range(k + 1, 5):
                later = dst[j * CHUNK:(j + 1) * CHUNK]
                if threads == 1:
                    assert later == untouched[j]
                else:   # another thread's range: untouched or its verified plaintext, never anything else
                    assert later in (untouched[j], src[j * CHUNK:(j + 1) * CHUNK])
            expect = bytearray(b"\xa5" * n)
            assert choose(None, None).open(KEY, 5, bytes(bad), expect, True) == k


def test_one_chunk_opens_into_new_bytes_as_a_batch_does():
    rng = random.Random(30)
    for n in (0, 1, 17, 1024, CHUNK - 1, CHUNK):
        for counter in COUNTERS:
            src = rng.randbytes(n)
            for final in (True, False):
                if not final and n != CHUNK:
                    continue
                sealed = reference_seal(counter, src, final)
                assert kernels.open_chunk(KEY, counter, sealed, final) == src
                assert kernels.open_chunk(KEY, counter, sealed, not final) is None     # the nonce's final flag
                assert kernels.open_chunk(KEY, counter + 1, sealed, final) is None
                bad = bytearray(sealed)
                bad[rng.randrange(len(bad))] ^= 1
                assert kernels.open_chunk(KEY, counter, bytes(bad), final) is None
    with pytest.raises(TypeError):
        kernels.open_chunk(KEY, 0, bytearray(16), True)
    with pytest.raises(ValueError):
        kernels.open_chunk(KEY, 0, bytes(15), True)
    with pytest.raises(ValueError):
        kernels.open_chunk(KEY, 0, bytes(SEALED + 1), True)
    with pytest.raises(ValueError):
        kernels.open_chunk(KEY[:31], 0, bytes(16), True)


def test_validation():
    with pytest.raises(ValueError):
        kernels.seal_chunks(KEY[:31], 0, b"x", bytearray(17), True)
    with pytest.raises(TypeError):
        kernels.seal_chunks("k" * 32, 0, b"x", bytearray(17), True)
    with pytest.raises(ValueError):
        kernels.seal_chunks(KEY, 0, b"x", bytearray(17), False)
    too_small = bytearray(16)
    with pytest.raises(ValueError) as failed:
        kernels.seal_chunks(KEY, 0, b"x", too_small, True)
    too_small.append(0)         # released when the call failed, though its frame lives on in the traceback
    assert failed.traceback
    with pytest.raises(TypeError):
        kernels.seal_chunks(KEY, 0, b"x", bytes(17), True)
    with pytest.raises(ValueError):
        kernels.seal_chunks(KEY, -1, b"x", bytearray(17), True)
    with pytest.raises(ValueError):
        kernels.seal_chunks(KEY, 0, b"x", bytearray(17), True, threads=0)
    with pytest.raises(TypeError):
        kernels.seal_chunks(KEY, 0, b"x", bytearray(17), True, threads=True)
    with pytest.raises(ValueError):
        kernels.open_chunks(KEY, 0, bytes(15), bytearray(1), True)
    with pytest.raises(ValueError):
        kernels.open_chunks(KEY, 0, bytes(SEALED + 1), bytearray(CHUNK + 1), False)


@pytest.mark.parametrize("threads", [1, 2])
def test_no_batch_numbers_a_chunk_past_2_64(threads):
    # The kernels count chunks in 64 bits: chunk 2 of a batch from 2**64 - 2 had been sealed under chunk 0's
    # nonce, the keystream and Poly1305 key again.
    top = 1 << 64
    src = bytes(3 * CHUNK)
    for seal in (True, False):
        for counter, chunks in ((top - 2, 3), (top - 1, 2), (top, 1)):
            n = chunks * CHUNK
            with pytest.raises(ValueError, match="numbered below 2"):
                if seal:
                    kernels.seal_chunks(KEY, counter, src[:n], bytearray(chunks * SEALED), True, threads=threads)
                else:
                    kernels.open_chunks(KEY, counter, bytes(chunks * SEALED), bytearray(n), True, threads=threads)
    assert kernels.seal_chunks(KEY, top - 3, src, bytearray(3 * SEALED), True, threads=threads) == 3 * SEALED


def test_isa_names_the_compiled_instruction_set():
    assert kernels.isa() in ("avx512ifma", "avx512f", "avx2", "neon", "baseline")
    from agefast.kernels import _common

    assert (kernels.isa() == "avx512ifma") == _common.IFMA


def test_chunks_dispatch(engine_setting):
    src = bytes(range(256)) * 1024
    engine_setting("cryptography")
    expect = reference_seal(9, src, True)
    for engine in ("numba", ""):          # forced, and by size (256 KiB is under the threshold)
        engine_setting(engine)
        dst = bytearray(len(expect))
        assert choose(None, 2).seal(KEY, 9, src, dst, True) == len(expect) and dst == expect
        back = bytearray(len(src))
        assert choose(None, 2).open(KEY, 9, expect, back, True) == 4 and back == src
    engine_setting("openssl")
    with pytest.raises(EngineError):
        choose(None, None).seal(KEY, 0, b"", bytearray(16), True)


def test_a_chunk_on_its_own_goes_to_loaded_kernels_from_lone_kernel_min(engine_setting, monkeypatch):
    from agefast.payload import engine

    engine_setting("")
    calls = []
    monkeypatch.setattr(kernels, "open_chunk", lambda *a, f=kernels.open_chunk: calls.append(len(a[2])) or f(*a))
    on_kernels = engine.Engine(kernels, None)
    for n in (engine.LONE_KERNEL_MIN - TAG, engine.LONE_KERNEL_MIN - TAG - 1, CHUNK):
        src = bytes(range(256)) * (n // 256) + bytes(n % 256)
        sealed = reference_seal(4, src, False) if n == CHUNK else reference_seal(4, src, True)
        assert on_kernels.open_chunk(KEY, 4, sealed, n != CHUNK) == src
        assert engine.Engine(None, None).open_chunk(KEY, 4, sealed, n != CHUNK) == src
        assert on_kernels.open_chunk(KEY, 5, sealed, n != CHUNK) is None
    assert calls == [engine.LONE_KERNEL_MIN] * 2 + [SEALED] * 2


@pytest.mark.parametrize("engine", ["kernels", "engine on the kernels", "engine on cryptography"])
def test_a_last_chunk_shorter_than_a_tag_is_refused_before_anything_is_written(engine):
    # open_chunks asked dst for n - chunks * TAG_SIZE bytes, 15 fewer than the kernels wrote for a batch of
    # whole chunks and a last one of 1 byte: they wrote past the end of the caller's buffer.
    from agefast.payload.engine import Engine

    sealed = reference_seal(0, bytes(3 * CHUNK), False) + b"\0"
    space = bytearray(len(sealed) - 4 * TAG + 64)
    dst = memoryview(space)[:len(sealed) - 4 * TAG]
    open_ = {"kernels": kernels.open_chunks,
             "engine on the kernels": Engine(kernels, 1, forced=True).open,
             "engine on cryptography": choose(None, None).open}[engine]
    with pytest.raises(ValueError, match="a last one of at least a tag"):
        open_(KEY, 0, sealed, dst, True)
    assert space == bytes(len(space))
