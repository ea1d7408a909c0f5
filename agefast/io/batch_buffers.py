"""Batch buffers, kept from one job to the next.

The pipeline's workers (agefast.payload.pipeline) and the file kernel's
(agefast.kernels.seal_file / open_file) each read and write a batch of 32
chunks at a time through two page-aligned buffers of ~2 MiB. New anonymous
memory is faulted in page by page as it is first written: on the project's
VM ~1.5 us a page, ~0.75 ms a buffer (2026-12-07, Zen 5), and a whole
`encrypt_file` of 6 MiB, which made four, took 5.1-5.8 ms. So a job gives
its buffers back when done, up to KEPT of them are kept, and the next job
takes those first: only the first job of a process pays for the pages (the
same 6 MiB then took 3.1-3.9 ms; benchmarks/HISTORY.md).

A kept buffer holds the last batch that went through it (plaintext, after a
decryption) until a job writes over it, as the memory of any freed Python
object holds what it held: nothing here wipes it, and docs/security.md keeps
an attacker who reads the process's memory out of agefast's model.

No lock: list.append and list.pop are each atomic in CPython, so threads
taking and giving back at once share the list safely, and a child forked
while another thread held a buffer finds the list as it was (with no lock
left held). Threads giving back at once may keep a buffer each past KEPT.
"""

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .portable import anonymous_memory

if TYPE_CHECKING:
    import mmap

# At most 32 MiB kept: every buffer of a job on 8 cores (two a worker), the
# first 16 of one on more (the rest are new each job, as they all were).
KEPT = 16
# Sizes are rounded up to this, so that the few sizes asked for (each batch
# in and out, sealed or not, plus a page for where it lies within one: all
# within 64 KiB of each other) are one size, and any buffer serves any job.
_GRANULE = 64 << 10

_kept: "list[mmap.mmap]" = []


def take(size: int) -> "mmap.mmap":
    """A page-aligned private buffer of at least `size` bytes: a kept one where
    one is large enough, else new (and zeroed). Its bytes are whatever the last
    job left in it: the caller writes before it reads."""
    size = -(-size // _GRANULE) * _GRANULE
    try:
        buffer = _kept.pop()
    except IndexError:
        return anonymous_memory(size)
    if len(buffer) >= size:
        return buffer
    return anonymous_memory(size)       # the smaller one is let go


def give_back(buffer: "mmap.mmap") -> None:
    """Keep `buffer`, which the caller no longer uses or lends, for a later take(); or let it go."""
    if len(_kept) < KEPT:
        _kept.append(buffer)


@contextlib.contextmanager
def batch_buffer(size: int) -> "Iterator[mmap.mmap]":
    """take(size) for the block, given back however the block ends."""
    buffer = take(size)
    try:
        yield buffer
    finally:
        give_back(buffer)
