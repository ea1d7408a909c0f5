"""Batched sealing and opening of consecutive STREAM chunks.

This is the one seam between the age format code and the AEAD engine. Format
code hands over many consecutive chunks at once, in caller-provided buffers;
the engine behind it (cryptography's ChaCha20Poly1305 here, the Numba kernels
in agefast.kernels for large batches) never allocates a chunk-sized buffer.

Chunk i of a batch starting at `counter` is sealed with the nonce
    (counter + i) as 11 bytes big-endian || flag
where flag is 0x01 only for the last chunk of a batch marked `final`.
Every chunk is CHUNK_SIZE bytes of plaintext except the last one of a final
batch, which may be shorter (and is empty only when the whole payload is).
"""

import os
import struct
import sys
import threading
import warnings
from types import ModuleType

from ._typing import Buffer

# cryptography's AEAD is imported where a batch first needs it, not with
# this module: the command seals a large file on the kernels before it
# imports cryptography (agefast._early_payload), and computes sizes here.

CHUNK_SIZE = 64 * 1024
TAG_SIZE = 16
SEALED_CHUNK_SIZE = CHUNK_SIZE + TAG_SIZE

# Batches of at least this many bytes may go to the Numba kernels
# (agefast.kernels); smaller ones stay on cryptography and never load them;
# measured in docs/engine.md. AGEFAST_ENGINE=cryptography|numba forces one engine.
KERNEL_MIN_BATCH = 16 * CHUNK_SIZE
# With threads=None a process switches to the kernels, on every core, once it
# has moved ENGINE_AFTER bytes, when the package ships a build of the kernels
# this CPU runs or their cache holds them (kernels.cached()): loading them
# then costs 3-8 ms, which 2 threads win back from about there on, even with
# the other core busy (docs/engine.md). Where neither has them (no shipped
# build fits, and the first job on a machine; `agefast --warm-up` fills the
# cache) they are compiled in a background
# thread once the process has moved COMPILE_AFTER bytes, as long as
# cryptography takes to seal the compile's ~8 s of CPU; until then
# cryptography serves. threads > 1 asks for the kernels at once. threads=1
# loads nothing (cryptography is nearly as fast on one core), but once the
# kernels are loaded in this process one core runs on them too, 6% faster.
ENGINE_AFTER = 32 << 20
COMPILE_AFTER = 1 << 30

_moved = 0
_loader = None
_uncached = False       # the cache was looked at and is cold
_unloadable = False     # loading the kernels failed in this process
_load_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _load_lock
    _load_lock = threading.Lock()   # a lock another thread held at fork stays held in the child


os.register_at_fork(after_in_child=_after_fork_in_child)


def _warn(e: Exception) -> None:
    # cryptography serves on, correctly; say why
    warnings.warn(f"agefast: the Numba engine could not be loaded, staying on cryptography: {e}", RuntimeWarning)


def _background_load() -> None:
    try:
        from . import kernels

        kernels.warm_up()
    except Exception as e:
        _warn(e)


def _loaded(kernels: ModuleType) -> ModuleType | None:
    """kernels, loaded; or None for cryptography where they cannot be (warned once, not tried again)."""
    global _unloadable
    if _unloadable:
        return None
    try:
        kernels.warm_up()
        return kernels
    except Exception as e:      # e.g. a cache on a noexec mount: the job still gets done
        _unloadable = True
        _warn(e)
        return None


def warm_kernels() -> ModuleType | None:
    """The kernels module where this process has loaded the kernels, else None (loads nothing)."""
    loaded = sys.modules.get("agefast.kernels")
    # A module still being imported by another thread has no is_warm yet.
    return loaded if loaded is not None and getattr(loaded, "is_warm", bool)() else None


def _kernels_for(size: int, threads: int | None) -> ModuleType | None:
    """The kernels module to run a batch of `size` bytes on, or None for cryptography."""
    global _moved, _loader, _uncached
    engine = os.environ.get("AGEFAST_ENGINE", "")
    if engine not in ("", "cryptography", "numba"):
        raise ValueError(f"AGEFAST_ENGINE must be 'cryptography' or 'numba', not {engine!r}")
    if engine == "cryptography" or (not engine and size < KERNEL_MIN_BATCH):
        return None
    if engine == "numba" or (threads is not None and threads > 1):
        from . import kernels

        if engine == "numba":
            kernels.warm_up()       # forced: a failure to load is the caller's to see
            return kernels
        return _loaded(kernels)
    loaded = warm_kernels()
    if loaded is not None:
        return loaded
    if threads == 1:
        return None
    with _load_lock:
        _moved += size
        if _moved < ENGINE_AFTER or _loader is not None:
            return None
        from . import kernels

        if not _uncached and not _unloadable:
            if kernels.cached():
                return _loaded(kernels)
            _uncached = True
        if _moved >= COMPILE_AFTER:
            _loader = threading.Thread(target=_background_load, name="agefast-engine-load", daemon=True)
            _loader.start()
    return None


def expect(size: int) -> None:
    """A stream of `size` bytes starts (a file, whose size is known): one that
    alone reaches ENGINE_AFTER counts as moved now, so that with threads=None
    it runs on the kernels from its first batch, not after ENGINE_AFTER bytes
    on cryptography."""
    global _moved
    if size >= ENGINE_AFTER:
        with _load_lock:
            _moved = max(_moved, ENGINE_AFTER)


def kernels_for_file(size: int, threads: int | None) -> ModuleType | None:
    """The kernels module, loaded, where a file of `size` bytes is to run on
    them by the rules above (with AGEFAST_ENGINE); None for cryptography."""
    expect(size)
    return _kernels_for(KERNEL_MIN_BATCH, threads)


def sealed_size(plaintext_size: int) -> int:
    """Ciphertext bytes for a final batch of `plaintext_size` plaintext bytes."""
    chunks = max(1, -(-plaintext_size // CHUNK_SIZE))
    return plaintext_size + chunks * TAG_SIZE


def plaintext_size(payload_size: int) -> int:
    """The plaintext size a payload of `payload_size` bytes holds if it is valid:
    every chunk is 64 KiB of plaintext and a 16-byte tag, the last one shorter."""
    full, rest = divmod(payload_size, SEALED_CHUNK_SIZE)
    return full * CHUNK_SIZE + max(0, rest - TAG_SIZE)


def seal_chunks(key: bytes, counter: int, src: Buffer, dst: Buffer, final: bool,
                threads: int | None = None, split: bool = True) -> int:
    """Seal the plaintext in `src` as consecutive chunks into `dst`.

    `src` must hold a whole number of chunks unless `final`; returns the number
    of bytes written to `dst`. `threads` is a hint for engines that can split
    a batch across cores; the cryptography path is single-threaded.
    split=False keeps the batch on the calling thread, for callers that run
    batches on `threads` cores at once: the engine is chosen as for `threads`.
    """
    src = memoryview(src).cast("B")
    dst = memoryview(dst).cast("B")
    n = len(src)
    if not final and (n == 0 or n % CHUNK_SIZE):
        raise ValueError("a non-final batch must hold whole chunks")
    kernels = _kernels_for(n, threads)
    if kernels is not None:
        sealed: int = kernels.seal_chunks(key, counter, src, dst, final, threads if split else 1)
        return sealed
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    aead = ChaCha20Poly1305(key)
    nonce = bytearray(12)
    written = 0
    pos = 0
    while True:
        end = min(pos + CHUNK_SIZE, n)
        last = end == n
        struct.pack_into(">QB", nonce, 3, counter, 1 if (last and final) else 0)
        written += aead.encrypt_into(nonce, src[pos:end], None, dst[written:written + end - pos + TAG_SIZE])
        counter += 1
        pos = end
        if last:
            return written


def open_chunks(key: bytes, counter: int, src: Buffer, dst: Buffer, final: bool,
                threads: int | None = None, split: bool = True) -> int:
    """Open consecutive sealed chunks from `src` into `dst`.

    Returns how many leading chunks verified. A chunk is decrypted into `dst`
    only after its tag verified, so `dst` never holds unauthenticated
    plaintext; when the return value k is short of the number of chunks in
    `src`, chunk k failed and its part of `dst` was not written. Release only
    the first k chunks: with threads > 1 the Numba engine opens ranges in
    parallel, so chunks after k may already hold their verified plaintext.
    `split` is as for seal_chunks.
    """
    src = memoryview(src).cast("B")
    dst = memoryview(dst).cast("B")
    n = len(src)
    if n < TAG_SIZE or (not final and n % SEALED_CHUNK_SIZE):
        raise ValueError("a batch must hold whole sealed chunks")
    kernels = _kernels_for(n, threads)
    if kernels is not None:
        opened: int = kernels.open_chunks(key, counter, src, dst, final, threads if split else 1)
        return opened
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    aead = ChaCha20Poly1305(key)
    nonce = bytearray(12)
    pos = 0
    out = 0
    done = 0
    while pos < n:
        end = min(pos + SEALED_CHUNK_SIZE, n)
        struct.pack_into(">QB", nonce, 3, counter, 1 if (end == n and final) else 0)
        size = end - pos - TAG_SIZE
        try:
            out += aead.decrypt_into(nonce, src[pos:end], None, dst[out:out + size])
        except InvalidTag:
            # OpenSSL may have written unverified plaintext before checking
            # the tag; wipe it so no caller buffer ever holds it.
            dst[out:out + size] = bytes(size)
            return done
        done += 1
        counter += 1
        pos = end
    return done
