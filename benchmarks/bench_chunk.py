"""Where one 64 KiB chunk's time goes inside the kernel, against ChaCha20 alone, with the data in cache.

Each case runs N times inside one compiled loop (no Python between calls),
on one chunk that stays in L2, in interleaved rounds; the figure is the
best round's microseconds per chunk. The kernel's functions are compiled by
Numba's JIT for this CPU (or for a class: NUMBA_CPU_NAME and
NUMBA_CPU_FEATURES as agefast.kernels._shipped.CLASSES has them), in the
form the environment asks for (AGEFAST_KERNEL_FORM, else the class's own:
the IFMA class is split):

- open, seal: a whole chunk (_aead._batch), what a kernel call does;
- the stitched loop: the 64 STEPs of ChaCha20 with the Poly1305 the loop
  itself hashes (_stitched._stitched_steps);
- the Poly1305 key: ChaCha20 block 0 and the powers of r (_stitched._key);
- the lanes and the tag: the rest of the MAC after the loop (_chunk._mac_end);
- ChaCha20 alone: agefast's 16-block function over the chunk (no MAC), and
  cryptography's ChaCha20 (OpenSSL, one update_into call per chunk, its
  Python call included).

"the rest" is open minus its three parts: nonce, key setup, tag check and
what the parts do not overlap when they run one after the other.

With --mib M the same parts are timed over M MiB of distinct sealed chunks,
which stream from memory as a large batch's do, each part added to the ones
before it (its cost is the difference): the stitched loop of every chunk;
the loop and each chunk's key; the loop, the key, the lanes and the tag (an
open, bar the nonce and the wrapping of the batch); open (one _batch call
over them all: where the build makes each chunk's key beside the lanes of
the chunk before it, _next_key, less than the parts before it); and ChaCha20 alone, cryptography's in 64 KiB pieces over
the same M MiB. The loop there hashes what it decrypts, as the split form's
does (the stitched zmm open hashes a STEP behind). A round is --calls / the
number of chunks passes over them, at least one.

    python benchmarks/bench_chunk.py [--reps N] [--calls N] [--mib M]
"""

import os
import sys
import time

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from numba import njit

import common
from agefast.kernels import _abi, _stitched
from agefast.kernels._aead import _age_nonces, _batch, _scratch
from agefast.kernels._chacha20 import _age_nonce, _chacha20_xor, _set_key
from agefast.kernels._chunk import _lane_groups, _mac_end, _tag_matches

CHUNK = _abi.CHUNK
COUNTER = 100
HASHED = 16 * _stitched._HASHED * (CHUNK // _stitched.STEP)    # bytes of the chunk the loop hashes
GROUPS = _lane_groups(CHUNK - HASHED)      # 16-lane groups hashed after it (none in the stitched form)


@njit(nogil=True)
def _whole(key, src, dst, mode, n):
    scr = _scratch()
    mask, aad = _age_nonces(scr)
    done = 0
    for _ in range(n):
        done += _batch(key, mask, aad, np.uint64(COUNTER), src, dst, False, mode, scr)
    return done


@njit(nogil=True)
def _keyed(key):
    """A scratch holding chunk COUNTER's Poly1305 key and powers, as open leaves them before its loop."""
    scr = _scratch()
    mask, aad = _age_nonces(scr)
    _set_key(scr[0], key)
    scr[0][13], scr[0][14], scr[0][15] = _age_nonce(np.uint64(COUNTER), 0, mask)
    _stitched._key(scr, aad, GROUPS > 0)
    return scr


@njit(nogil=True)
def _loop(key, sealed, dst, n):
    scr = _keyed(key)
    for _ in range(n):
        scr[0][12] = 1
        _stitched._stitched_steps(scr[0], scr[1], sealed, 0, dst, 0, sealed, 0, CHUNK // _stitched.STEP)


@njit(nogil=True)
def _poly_key(key, n):
    scr = _keyed(key)
    aad = _age_nonces(scr)[1]
    for _ in range(n):
        _stitched._key(scr, aad, GROUPS > 0)


@njit(nogil=True)
def _lanes_and_tag(key, sealed, n):
    scr = _keyed(key)
    for _ in range(n):
        _mac_end(scr, sealed[HASHED:CHUNK], GROUPS, 0, CHUNK, scr[5], 2048)


@njit(nogil=True)
def _chacha20(key, src, dst, n):
    scr = _scratch()
    _set_key(scr[0], key)
    for _ in range(n):
        scr[0][12] = 1
        _chacha20_xor(scr[0], src, dst, scr[5][1024:2048])


@njit(nogil=True)
def _stream(key, sealed, dst, chunks, parts, n):
    """`parts` of an open of `chunks` sealed chunks, n times: 0 the loop, 1 and the key, 2 and the lanes and
    the tag; returns the chunks verified."""
    scr = _scratch()
    mask, aad = _age_nonces(scr)
    _set_key(scr[0], key)
    verified = 0
    for i in range(n * chunks):
        c = i % chunks
        at = c * (CHUNK + 16)
        scr[0][13], scr[0][14], scr[0][15] = _age_nonce(np.uint64(COUNTER + c), 0, mask)
        if parts >= 1:
            _stitched._key(scr, aad, GROUPS > 0)
        scr[0][12] = 1
        _stitched._stitched_steps(scr[0], scr[1], sealed, at, dst, c * CHUNK, sealed, at, CHUNK // _stitched.STEP)
        if parts >= 2:
            _mac_end(scr, sealed[at + HASHED:at + CHUNK], GROUPS, 0, CHUNK, scr[5], 2048)
            verified += _tag_matches(scr[5], 2048, sealed, at + CHUNK)
    return verified // n


def _page_aligned(data: bytes) -> np.ndarray:
    """`data` in an array that starts at a page boundary: every run has the buffers at the same places
    relative to each other modulo 4096, which the kernel's loads and stores are sensitive to (4K
    aliasing, benchmarks/HISTORY.md)."""
    memory = np.zeros(len(data) + 4096, np.uint8)
    start = -memory.ctypes.data % 4096
    array = memory[start:start + len(data)]
    array[:] = np.frombuffer(data, np.uint8)
    return array


def cases() -> dict:
    key_bytes = bytes(range(32))
    key = np.frombuffer(key_bytes, np.uint8).copy()
    plain = os.urandom(CHUNK)
    nonce = COUNTER.to_bytes(11, "big") + b"\x00"
    sealed = _page_aligned(ChaCha20Poly1305(key_bytes).encrypt(nonce, plain, None))
    src = _page_aligned(plain)
    dst, out = _page_aligned(bytes(CHUNK)), _page_aligned(bytes(CHUNK + 16))
    if _whole(key, sealed, dst, _abi.OPEN, 1) != 1 or bytes(dst) != plain:
        raise SystemExit("the kernel does not open cryptography's chunk")
    if _whole(key, src, out, _abi.SEAL, 1) != CHUNK + 16 or bytes(out) != bytes(sealed):
        raise SystemExit("the kernel does not seal as cryptography does")
    stream = Cipher(algorithms.ChaCha20(key_bytes, bytes(16)), mode=None).encryptor()
    buffer = bytearray(CHUNK)

    def openssl(n):
        for _ in range(n):
            stream.update_into(plain, buffer)

    return {"open": lambda n: _whole(key, sealed, dst, _abi.OPEN, n),
            "seal": lambda n: _whole(key, src, out, _abi.SEAL, n),
            "the stitched loop": lambda n: _loop(key, sealed, dst, n),
            "the Poly1305 key": lambda n: _poly_key(key, n),
            "the lanes and the tag": lambda n: _lanes_and_tag(key, sealed, n),
            "ChaCha20 alone, agefast": lambda n: _chacha20(key, src, dst, n),
            "ChaCha20 alone, cryptography": openssl}


# Each streaming case that adds a part to another: that other case (the part's cost is the difference).
_ADDS_TO = {"the loop and the key": "the stitched loop", "the loop, key, lanes and tag": "the loop and the key"}


def streaming_cases(mib: int) -> tuple[int, dict]:
    """(chunks, {case: run(n)}), each run n passes over `mib` MiB of chunks."""
    key_bytes = bytes(range(32))
    key = np.frombuffer(key_bytes, np.uint8).copy()
    chunks = (mib << 20) // CHUNK
    plain = os.urandom(CHUNK)
    aead = ChaCha20Poly1305(key_bytes)
    sealed = _page_aligned(b"".join(aead.encrypt((COUNTER + c).to_bytes(11, "big") + b"\x00", plain, None)
                                    for c in range(chunks)))
    dst = _page_aligned(bytes(chunks * CHUNK))
    if _stream(key, sealed, dst, chunks, 2, 1) != chunks or _whole(key, sealed, dst, _abi.OPEN, 1) != chunks:
        raise SystemExit("the kernel's parts do not open cryptography's chunks")
    stream = Cipher(algorithms.ChaCha20(key_bytes, bytes(16)), mode=None).encryptor()
    src, out = memoryview(_page_aligned(plain * chunks)), memoryview(_page_aligned(bytes(chunks * CHUNK)))

    def openssl(n):
        for _ in range(n):
            for at in range(0, chunks * CHUNK, CHUNK):
                stream.update_into(src[at:at + CHUNK], out[at:at + CHUNK])

    return chunks, {"open": lambda n: _whole(key, sealed, dst, _abi.OPEN, n),
                    "the stitched loop": lambda n: _stream(key, sealed, dst, chunks, 0, n),
                    "the loop and the key": lambda n: _stream(key, sealed, dst, chunks, 1, n),
                    "the loop, key, lanes and tag": lambda n: _stream(key, sealed, dst, chunks, 2, n),
                    "ChaCha20 alone, cryptography": openssl}


def _best(work: dict, reps: int, calls: int, chunks: int = 1) -> dict:
    """{case: microseconds a chunk in its best round}: `reps` interleaved rounds, each case called with `calls`
    once a round, each call `chunks` chunks."""
    best = {name: float("inf") for name in work}
    for r in range(reps):
        names = list(work)[r % len(work):] + list(work)[:r % len(work)]
        for name in names:
            t = time.perf_counter()
            work[name](calls)
            best[name] = min(best[name], (time.perf_counter() - t) / calls / chunks * 1e6)
    return best


def streaming(args) -> None:
    chunks, work = streaming_cases(args.mib)
    passes = max(1, args.calls // chunks)
    best = _best(work, args.reps, passes, chunks)
    print(f"{args.mib} MiB of {CHUNK // 1024} KiB chunks from memory, best of {args.reps} rounds of {passes} "
          f"passes, each part added to those before it (its cost is the difference):")
    for name, us in best.items():
        added = f"+{us - best[_ADDS_TO[name]]:6.3f}" if name in _ADDS_TO else ""
        print(f"  {name:30s} {us:7.3f} us a chunk {added}")
    print(f"  open / ChaCha20 alone: {best['ChaCha20 alone, cryptography'] / best['open']:.3f}x; "
          f"the loop alone: {best['ChaCha20 alone, cryptography'] / best['the stitched loop']:.3f}x")
    print(f"load average at the end: {os.getloadavg()}", file=sys.stderr)
    common.save("chunk_stream", {"mib": args.mib, "passes": passes, "us_per_chunk": best})


def main() -> None:
    args = common.arguments(__doc__, 9, options=[("--calls", 2000, "calls of each case per round"),
                                                 ("--mib", 0, "MiB of chunks streamed from memory (0: one in cache)")])
    if args.mib:
        return streaming(args)
    work = cases()
    for run in work.values():
        run(1)      # compile
    best = _best(work, args.reps, args.calls)
    best["the rest"] = best["open"] - sum(best[part] for part in ("the stitched loop", "the Poly1305 key",
                                                                  "the lanes and the tag"))
    form = os.environ.get("AGEFAST_KERNEL_FORM", "the class's own")
    print(f"one {CHUNK // 1024} KiB chunk in cache, form: {form} (_HASHED {_stitched._HASHED} of "
          f"{_stitched.STEP // 16} blocks a STEP in the loop), best of {args.reps} rounds of {args.calls} calls:")
    for name, us in best.items():
        print(f"  {name:30s} {us:7.3f} us  {us / best['open']:6.1%} of open")
    print(f"load average at the end: {os.getloadavg()}", file=sys.stderr)
    common.save("chunk", {"calls": args.calls, "form": form, "us_per_chunk": best})


if __name__ == "__main__":
    main()
