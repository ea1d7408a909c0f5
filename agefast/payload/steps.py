"""A payload in memory, sealed or opened in steps as its result is faulted in.

encrypt and decrypt (and their *_into forms, agefast.api) hand the whole
payload to the job's engine in steps of MEMORY_STEP chunks, each once its
part of the result is there to be written: a new result's pages are faulted
in ahead of the engine by a thread of agefast.io.buffers, which `ready(n)`
waits for; a caller's buffer is there at once (ready_now). A payload of one
chunk into new bytes takes one call of the engine (seal_whole, open_whole).
"""

from collections.abc import Callable, Iterator

from ..io import cpus
from ..io.buffers import new_bytes
from .engine import Engine
from .rules import CHUNK_SIZE, MEMORY_STEP, SEALED_CHUNK_SIZE, TAG_SIZE, chunk_count, plaintext_size, sealed_size
from .stream import open_batch


def _steps(count: int) -> Iterator[tuple[int, int]]:
    """(first, stop) chunk ranges of MEMORY_STEP over `count` chunks (one, empty, for none)."""
    for first in range(0, max(count, 1), MEMORY_STEP):
        yield first, min(first + MEMORY_STEP, count)


def beside_populating(engine: Engine, waited: bool) -> Engine:
    """The engine to seal or open a step of a new result on, given whether the step waited for its pages.

    A thread of agefast.io.buffers faults the result's pages in ahead of the
    engine. Where the engine caught up with it (the step waited), threads=None
    leaves it a core of its own once the kernels run: on the 2-core VM (AMD
    EPYC Zen 5, 2026-12-02) a fresh process encrypting 256 MiB took 104 ms
    with the kernels on one thread beside it, 117 ms on two, 112 ms on
    cryptography (medians of 7); the faulting in, ~150 ms on one thread alone,
    is the floor. Where the pages were in first, the kernels are the slower
    side and take every core: on Zen 2 (AVX2, 2026-12-06), in a process that
    had freed such results before, 256 MiB took 110-114 ms on one thread
    beside the faulting in, 91-95 so (benchmarks/HISTORY.md).
    """
    if not waited or engine.threads is not None or engine.kernels is None:
        return engine
    return engine.on(max(1, cpus.count() - 1))


def seal_in_steps(engine: Engine, key: bytes, plaintext: memoryview, view: memoryview, head: bytes,
                  ready: Callable[[int], bool]) -> None:
    """Write the age file into `view`: `head` (the header and payload
    nonce), then `plaintext` sealed as the payload's chunks, calling ready(n)
    before writing anywhere in view[:n]."""
    at = len(head)
    ready(at)
    view[:at] = head
    out = view[at:]
    count = chunk_count(sealed_size(len(plaintext)))
    for first, stop in _steps(count):
        waited = ready(at + min(stop * SEALED_CHUNK_SIZE, len(out)))
        beside_populating(engine, waited).seal(key, first, plaintext[first * CHUNK_SIZE:stop * CHUNK_SIZE],
                                               out[first * SEALED_CHUNK_SIZE:], stop == count)


def open_in_steps(engine: Engine, key: bytes, payload: memoryview, view: memoryview,
                  ready: Callable[[int], bool]) -> None:
    """Open the payload's chunks into `view`, calling ready(n) before writing
    anywhere in view[:n]; a PayloadError once a step fails, with only the
    verified chunks before it written."""
    count = chunk_count(len(payload))
    for first, stop in _steps(count):
        waited = ready(min(stop * CHUNK_SIZE, len(view)))
        problem = open_batch(beside_populating(engine, waited), key, first,
                             payload[first * SEALED_CHUNK_SIZE:stop * SEALED_CHUNK_SIZE],
                             view[first * CHUNK_SIZE:], stop == count)[2]
        if problem is not None:
            try:
                raise problem
            finally:
                # Else this frame's name for the error, the error's traceback and this frame would be a cycle,
                # keeping the view of the caller's buffer exported until the garbage collector runs.
                del problem


def seal_whole(engine: Engine, key: bytes, plaintext: memoryview, head: bytes) -> bytes:
    """New bytes: `head` (the header and payload nonce), then `plaintext` sealed as the payload."""
    if len(plaintext) <= CHUNK_SIZE:
        return head + engine.seal_lone(key, plaintext)
    return new_bytes(len(head) + sealed_size(len(plaintext)),
                     lambda view, ready: seal_in_steps(engine, key, plaintext, view, head, ready))


def open_whole(engine: Engine, key: bytes, payload: memoryview) -> bytes:
    """The plaintext of `payload` as new bytes; a PayloadError if it is invalid."""
    if TAG_SIZE <= len(payload) <= SEALED_CHUNK_SIZE:
        plaintext = engine.open_lone(key, payload)
        if plaintext is not None:
            return plaintext
        # It failed: the general path below fails too, and says why.
    return new_bytes(plaintext_size(len(payload)),
                     lambda view, ready: open_in_steps(engine, key, payload, view, ready))
