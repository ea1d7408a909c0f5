"""The engine that seals and opens batches of consecutive STREAM chunks, chosen once per job.

This is the one seam between the payload code and the AEAD. A job (one
encryption or decryption: a buffer, a file, a stream, a random-access
reader) asks choose() for its Engine once, with what it knows (its size, the
threads it may use), and passes it down; every batch of the job goes
through that object. Behind it is cryptography's ChaCha20Poly1305 or the
Numba kernels of agefast.kernels; neither allocates a chunk-sized buffer.

Chunk i of a batch starting at `counter` gets chunk counter + i's nonce
(rules.chunk_nonce), final only for the last chunk of a batch marked `final`.
"""

import functools
import os
import sys
import threading
from types import ModuleType
from typing import TYPE_CHECKING

from .._typing import Buffer
from ..errors import EngineError
from ..io import portable
from .rules import (CHUNK_NONCE_SIZE, CHUNK_SIZE, KERNEL_MIN_CHUNKS, KERNEL_SPLIT_CHUNKS, LONE_CHUNK_NONCE,
                    SEALED_CHUNK_SIZE, TAG_SIZE, chunk_count, chunk_nonce, plaintext_size)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

# cryptography's AEAD is imported where a batch first needs it, not with
# this module: the command seals a large file on the kernels before it
# imports cryptography (agefast.cli.early_payload), and computes sizes here.
# Kept once imported: an import statement in every call cost a small
# message's seal 1.7 us and its open 3.1 us.
_cryptography: "tuple[type[ChaCha20Poly1305], type[Exception]] | None" = None    # (ChaCha20Poly1305, InvalidTag)


def _aead() -> "tuple[type[ChaCha20Poly1305], type[Exception]]":
    """cryptography's ChaCha20Poly1305 and InvalidTag, imported on first use."""
    global _cryptography
    if _cryptography is None:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305 as AEAD

        _cryptography = AEAD, InvalidTag
    return _cryptography

# Batches of at least KERNEL_MIN_BATCH bytes may go to the kernels, smaller
# ones stay on cryptography; from KERNEL_SPLIT_BATCH on a batch is split over
# the job's threads, below it one kernel call on the calling thread runs it
# (measured in docs/engine.md).
KERNEL_MIN_BATCH = KERNEL_MIN_CHUNKS * CHUNK_SIZE
KERNEL_SPLIT_BATCH = KERNEL_SPLIT_CHUNKS * CHUNK_SIZE
# A chunk opened on its own (Engine.open_chunk) goes to loaded kernels from
# this sealed size on: one call of kernels.open_chunk against cryptography's
# decrypt took 0.95x its time at 16 KiB, 1.05x at 32 and 1.12x at 64
# (17.5 us against 19.6; medians of per-call medians, Zen 4 avx512ifma,
# 2026-12-05, load average 10: benchmarks/bench_small.py --case lone).
LONE_KERNEL_MIN = 32 << 10
# With threads=None a job moves to the kernels, on every core, once it is
# known to move ENGINE_AFTER bytes (its size says so), or once the jobs of
# this process have moved that much on cryptography (many in-memory calls of
# a few MiB, a stream whose size is not known: _Tally), where the package
# ships a build of the kernels this CPU runs or their cache holds them
# (kernels.cached()): loading them then costs 3-8 ms, which 2 threads win
# back from about there on, even with the other core busy (docs/engine.md).
# Where neither has them (no shipped build fits, and the first job on a
# machine; `agefast --warm-up` fills the cache) a job of COMPILE_AFTER bytes,
# or a process that has moved that much, has them compiled in a background
# thread, as long as cryptography takes to seal the compile's ~8 s of CPU,
# and moves to them once they are ready; until then cryptography serves.
# threads > 1 asks for the kernels at once, unless the job is known to be
# smaller than KERNEL_SPLIT_BATCH (it would never split a batch over them).
# A job known to be smaller than KERNEL_MIN_BATCH never runs on them, nor
# counts towards the thresholds. threads=1 runs on them where they are loaded,
# and a job of ONE_CORE_AFTER bytes or more loads them where they are shipped
# or cached; it never compiles them (that would take a second core) and
# counts nothing.
# AGEFAST_ENGINE=cryptography|numba forces one (forced).
ENGINE_AFTER = 32 << 20
COMPILE_AFTER = 1 << 30
# One core: loading the kernels into a process that has imported agefast
# and cryptography took 7.0 ms from the cache (load average 0.3; under load
# 10, 9.8 ms of CPU from the cache and 9.5 from a shipped build), and each
# MiB then moves 55 us sooner (kernels.seal_chunks / open_chunks at 4.0 GB/s
# against cryptography's chunk loop at 3.3, benchmarks/bench_isa.py), so a
# job repays the load from about 127 MiB (2026-12-05, Zen 4 avx512ifma,
# 2-vCPU KVM guest; benchmarks/bench_engine.py --one-core 7 measures the
# load and the jobs around the crossover in fresh processes).
ONE_CORE_AFTER = 128 << 20


# Read at a process's first job and kept: looking up the variable where it is
# not set (as nearly everywhere) raises and catches KeyError twice inside
# os.environ, 4-5 us of each 1 KiB encryption or decryption (~100-125 us; in
# alternating rounds, 2026-12-03, Zen 2). An invalid value is not kept: every
# job raises. Tests and benchmarks that change it in process clear the cache.
@functools.cache
def forced() -> str:
    """The engine AGEFAST_ENGINE forces, "cryptography" or "numba"; "" where it forces none; EngineError for any
    other value."""
    engine = os.environ.get("AGEFAST_ENGINE", "")
    if engine not in ("", "cryptography", "numba"):
        raise EngineError(f"AGEFAST_ENGINE must be 'cryptography' or 'numba', not {engine!r}")
    return engine


def _warm() -> ModuleType | None:
    """The kernels module where this process has loaded the kernels, else None (loads nothing)."""
    loaded = sys.modules.get("agefast.kernels")
    # A module still being imported by another thread has no is_warm yet.
    return loaded if loaded is not None and getattr(loaded, "is_warm", bool)() else None


def _loaded() -> ModuleType | None:
    """The kernels, loaded (compiled first if need be); None where they cannot be
    (agefast.kernels.load_or_warn: warned once, not tried again)."""
    from .. import kernels

    return kernels if kernels.load_or_warn() else None


def _loaded_if_cached() -> ModuleType | None:
    """The kernels where the cache holds them for this machine (no compile); else None."""
    from .. import kernels

    return _loaded() if kernels.cached() else None


def _compile_in_background() -> None:
    from .. import kernels

    kernels.compile_in_background()


class _Tally:
    """The bytes this process's jobs have moved on cryptography while they
    could have moved to the kernels (threads=None, not known to be small)."""

    def __init__(self) -> None:
        self._moved = 0
        self._lock = threading.Lock()

    def after_fork_in_child(self) -> None:
        # A child forked while another thread counted would find the lock held forever.
        self._lock = threading.Lock()

    def kernels_after(self, n: int) -> ModuleType | None:
        """Count `n` more bytes; the kernels, where crossing ENGINE_AFTER loads
        them from the cache, else None (and past COMPILE_AFTER, the compile started)."""
        with self._lock:
            before, self._moved = self._moved, self._moved + n
        kernels = _loaded_if_cached() if before < ENGINE_AFTER <= before + n else None
        if kernels is None and before + n >= COMPILE_AFTER:
            _compile_in_background()
        return kernels


_tally = _Tally()
portable.after_fork_in_child(_tally.after_fork_in_child)


class Engine:
    """Seals and opens the batches of one job.

    `kernels` is the loaded agefast.kernels module, or None for cryptography;
    `threads` the cores a batch may be split over (None: all). A job still on
    cryptography that may move to the kernels (no AGEFAST_ENGINE) watches for
    them between batches, and with threads=None counts its bytes towards
    ENGINE_AFTER and COMPILE_AFTER (_tally).
    """

    def __init__(self, kernels: ModuleType | None, threads: int | None, *, forced: bool = False,
                 watch: bool = False) -> None:
        self.kernels = kernels
        self.threads = threads
        self._forced = forced       # AGEFAST_ENGINE=numba: every batch on the kernels
        self._watch = watch and kernels is None
        self._lock = threading.Lock()

    def on(self, threads: int | None) -> "Engine":
        """This engine with a batch split over `threads` cores."""
        return Engine(self.kernels, threads, forced=self._forced)

    def _kernels_for(self, n: int) -> ModuleType | None:
        if self._watch:
            self._upgrade(n)
        if self.kernels is None or (n < KERNEL_MIN_BATCH and not self._forced):
            return None
        return self.kernels

    def _threads_for(self, n: int, split: bool) -> int | None:
        """The cores a kernel call for a batch of n bytes is split over."""
        return self.threads if split and (n >= KERNEL_SPLIT_BATCH or self._forced) else 1

    def _upgrade(self, n: int) -> None:
        with self._lock:
            if self.kernels is not None:
                return
            self.kernels = _warm()
            if self.kernels is None and self.threads is None:
                self.kernels = _tally.kernels_after(n)
        if self.kernels is not None:
            self._watch = False

    def seal(self, key: bytes, counter: int, src: Buffer, dst: Buffer, final: bool, split: bool = True) -> int:
        """Seal the plaintext in `src` as consecutive chunks into `dst`.

        `src` must hold a whole number of chunks unless `final`; returns the
        number of bytes written to `dst`. split=False keeps the batch on the
        calling thread, for callers that run batches on `threads` cores at once.
        """
        src = memoryview(src).cast("B")
        dst = memoryview(dst).cast("B")
        n = len(src)
        if not final and (n == 0 or n % CHUNK_SIZE):
            raise ValueError("a non-final batch must hold whole chunks")
        kernels = self._kernels_for(n)
        if kernels is not None:
            sealed: int = kernels.seal_chunks(key, counter, src, dst, final, self._threads_for(n, split))
            return sealed
        aead = _aead()[0](key)
        nonce = bytearray(CHUNK_NONCE_SIZE)
        written = 0
        pos = 0
        while True:
            end = min(pos + CHUNK_SIZE, n)
            last = end == n
            chunk_nonce(nonce, counter, last and final)
            written += aead.encrypt_into(nonce, src[pos:end], None, dst[written:written + end - pos + TAG_SIZE])
            counter += 1
            pos = end
            if last:
                return written

    def open(self, key: bytes, counter: int, src: Buffer, dst: Buffer, final: bool, split: bool = True) -> int:
        """Open consecutive sealed chunks from `src` into `dst`.

        Returns how many leading chunks verified. Once this returns, `dst`
        holds those chunks' plaintext and nothing else of `src`: when the
        return value k is short of the number of chunks in `src`, chunk k failed
        and its part of `dst` and all after it were not written, or hold zeros.
        `split` as for seal.
        """
        src = memoryview(src).cast("B")
        dst = memoryview(dst).cast("B")
        n = len(src)
        # As kernels.open_chunks checks it, for both paths: a last chunk shorter than a tag is none.
        if n < TAG_SIZE or (not final and n % SEALED_CHUNK_SIZE) or 0 < n % SEALED_CHUNK_SIZE < TAG_SIZE:
            raise ValueError("a batch must hold whole sealed chunks, and a last one of at least a tag")
        kernels = self._kernels_for(n)
        if kernels is not None:
            opened: int = kernels.open_chunks(key, counter, src, dst, final, self._threads_for(n, split))
            if opened < chunk_count(n):
                # The kernels zero a chunk that fails, but open ranges in parallel: the chunks after it may
                # hold their plaintext, which a caller's buffer (decrypt_into, readinto) must not keep once
                # the file failed. Only the verified prefix stays.
                start = opened * CHUNK_SIZE
                end = min(plaintext_size(n), len(dst))
                dst[start:end] = bytes(end - start)
            return opened
        new_aead, invalid_tag = _aead()
        aead = new_aead(key)
        nonce = bytearray(CHUNK_NONCE_SIZE)
        pos = 0
        out = 0
        done = 0
        while pos < n:
            end = min(pos + SEALED_CHUNK_SIZE, n)
            chunk_nonce(nonce, counter, end == n and final)
            size = end - pos - TAG_SIZE
            try:
                out += aead.decrypt_into(nonce, src[pos:end], None, dst[out:out + size])
            except invalid_tag:
                # OpenSSL may have written unverified plaintext before checking
                # the tag; wipe it so no caller buffer ever holds it.
                dst[out:out + size] = bytes(size)
                return done
            done += 1
            counter += 1
            pos = end
        return done

    def open_chunk(self, key: bytes, counter: int, sealed: bytes, final: bool) -> bytes | None:
        """Sealed chunk `counter` opened into new bytes; None if it does not verify.

        Random access reads a chunk at a time. Where the kernels are loaded
        a chunk of LONE_KERNEL_MIN bytes or more is opened by one call of
        theirs without the views and lending of open (kernels.open_chunk).
        """
        if self._watch:
            self._upgrade(len(sealed))
        if self.kernels is not None and (len(sealed) >= LONE_KERNEL_MIN or self._forced):
            opened: bytes | None = self.kernels.open_chunk(key, counter, sealed, final)
            return opened
        new_aead, invalid_tag = _aead()
        nonce = bytearray(CHUNK_NONCE_SIZE)
        chunk_nonce(nonce, counter, final)
        try:
            return new_aead(key).decrypt(nonce, sealed, None)
        except invalid_tag:
            return None

    # A payload of one chunk, as encrypt and decrypt of a small message meet
    # it, is sealed or opened by one call into new bytes of its own: through
    # seal and open (the views, the nonce, the result's buffer around a 3 us
    # AEAD call) a 1 KiB message's encryption took 151 us instead of 131 and
    # its decryption 132 instead of 112 (bench_small.py, Zen 2, 2026-12-03).

    def seal_lone(self, key: bytes, plaintext: memoryview) -> bytes:
        """The sealed payload (after its nonce) of `plaintext`, at most one
        chunk: chunk 0, final, as new bytes."""
        if len(plaintext) > CHUNK_SIZE:
            raise ValueError("a lone chunk holds at most CHUNK_SIZE bytes")
        if self._kernels_for(len(plaintext)) is None:
            return _aead()[0](key).encrypt(LONE_CHUNK_NONCE, plaintext, None)
        sealed = bytearray(len(plaintext) + TAG_SIZE)
        self.seal(key, 0, plaintext, sealed, True)
        return bytes(sealed)

    def open_lone(self, key: bytes, sealed: memoryview) -> bytes | None:
        """The plaintext of a payload of one sealed chunk, `sealed` opened as
        chunk 0, final, as new bytes; None if it does not verify (the caller
        says why: agefast.payload.stream.open_batch)."""
        n = len(sealed)
        if not TAG_SIZE <= n <= SEALED_CHUNK_SIZE:
            raise ValueError("a lone chunk is a tag and at most CHUNK_SIZE bytes")
        if self._kernels_for(n) is None:
            new_aead, invalid_tag = _aead()
            try:
                return new_aead(key).decrypt(LONE_CHUNK_NONCE, sealed, None)
            except invalid_tag:
                return None
        plain = bytearray(n - TAG_SIZE)
        return bytes(plain) if self.open(key, 0, sealed, plain, True) == 1 else None


# More threads than any machine agefast runs on has cores: a stream starts one per thread it is given.
MAX_THREADS = 256


def checked_threads(threads: object) -> int | None:
    """`threads` as every API call takes it: None (every core) or an int of at least 1, at most MAX_THREADS;
    TypeError or ValueError otherwise, whatever the size of the job."""
    if threads is None:
        return None
    if not isinstance(threads, int) or isinstance(threads, bool):
        raise TypeError(f"threads must be an int or None, not {type(threads).__name__}")
    if threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    return min(threads, MAX_THREADS)


def choose(size: int | None, threads: int | None) -> Engine:
    """The engine for a job of `size` bytes (None: not known, a stream) on
    `threads` cores (None: all), by the rules above."""
    threads = checked_threads(threads)
    forcing = forced()
    if forcing == "cryptography":
        return Engine(None, threads)
    if forcing == "numba":
        from .. import kernels

        kernels.warm_up()       # forced: a failure to load is the caller's to see
        return Engine(kernels, threads, forced=True)
    if size is not None and size < KERNEL_MIN_BATCH:
        # A small job never loads the kernels, nor runs on them where they
        # are loaded: none of its batches is large enough (Engine._kernels_for).
        return Engine(None, threads)
    if threads is not None and threads > 1 and (size is None or size >= KERNEL_SPLIT_BATCH):
        return Engine(_loaded(), threads)
    warm = _warm()
    if warm is not None:
        return Engine(warm, threads)
    if threads == 1 and size is not None and size >= ONE_CORE_AFTER:
        cached = _loaded_if_cached()
        if cached is not None:
            return Engine(cached, threads)
    if threads == 1 or size is None:
        return Engine(None, threads, watch=True)
    if size >= ENGINE_AFTER:
        cached = _loaded_if_cached()
        if cached is not None:
            return Engine(cached, threads)
        if size >= COMPILE_AFTER:
            _compile_in_background()
    return Engine(None, threads, watch=True)
