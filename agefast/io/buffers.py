"""Large result buffers, written once.

`encrypt` and `decrypt` return a new bytes object as large as the payload.
bytes.__new__ and io.BytesIO zero-fill a new buffer, touching every page
before the engine writes it again; here the bytes object is created
uninitialised (PyBytes_FromStringAndSize(NULL, n), as C extensions do) and
written once in place before anyone else holds it. 256 MiB in a fresh
process: 166 ms against 174 ms for BytesIO; in a loop 132 against 162 ms
(benchmarks/bench_alloc.py, docs/engine.md).

A fresh result's pages are faulted in ahead of the engine, by a thread of
its own calling madvise(MADV_POPULATE_WRITE) (Linux 5.14+) on one step after
another, while the engine writes the steps already faulted in: on the
project's VM populating 256 MiB takes ~100 ms, where taking the same page
faults one by one inside the kernels' stores cost 260-390 ms
(benchmarks/bench_engine.py --fresh, docs/engine.md); populating first and
then writing took the sum of the two, 140-180 ms. Where the engine catches
up with that thread, it faults in the steps nobody has taken itself rather
than wait: on the 2-vCPU Zen 5 VM of 2026-12-07 two threads populated 256
MiB in 40 ms against one's 76, and `encrypt` / `decrypt` of 256 MiB in a
loop took 60 ms instead of 78; on a host where two threads fault no faster
than one (the project's VM in November) the engine waits as long as it
would have (benchmarks/HISTORY.md).

Transparent huge pages were tried and dropped: on the project's VM they cost
680 ms for the same buffer in a fresh process (53 ms only in a loop that
had just freed one), because fresh 2 MiB blocks come from memory the
balloon device has handed back to the host.
"""

import functools
import io
import sys
import threading
from collections.abc import Callable
from typing import Any

# Below this a result fits in few pages and io.BytesIO serves as well.
_RAW_MIN = 8 << 20
# The populating thread's step: the engine waits for at most one step at the end.
_STEP = 4 << 20

# fill(view, ready): writes every byte of view, calling ready(n) before it
# writes anywhere in view[:n] past what it asked for last; ready says whether
# it had to wait for the pages (agefast.payload.steps gives the thread that
# faults them in a core of its own only then).
Fill = Callable[[memoryview, Callable[[int], bool]], None]


_MADV_POPULATE_WRITE = 23     # linux/mman.h
_PAGE = 4096


@functools.cache
def _ctypes() -> tuple[Any, Any, Any] | None:
    """ctypes, PyBytes_FromStringAndSize and madvise (None off Linux), or None on a Python without ctypes.

    Imported at the first large result, not with agefast: 2.4 ms of start-up.
    """
    try:
        import ctypes
    except ImportError:
        return None
    new = ctypes.pythonapi.PyBytes_FromStringAndSize
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
    madvise = None
    if sys.platform == "linux":
        madvise = ctypes.CDLL(None).madvise
        madvise.restype = ctypes.c_int
        madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return ctypes, new, madvise


def ready_now(end: int) -> bool:
    """The `ready` of a buffer that is there to be written at once (a caller's, or a small one): no wait."""
    return False


class _Populator:
    """Faults in the whole pages of [address, address + size) for writing, a
    step at a time: a thread of its own takes one step after another, and a
    writer that needs pages nobody has taken yet faults them in itself
    instead of waiting (where the host faults pages in on two cores at once,
    that halves the wait; where it does not, the writer would have waited
    as long).

    Best effort: where madvise refuses (EINVAL before Linux 5.14) it stops,
    and the pages are faulted in as they are written, as without it.
    """

    def __init__(self, madvise: Callable[[int, int, int], int], address: int, size: int) -> None:
        self._madvise = madvise
        self._address = address
        self._start = -(-address // _PAGE) * _PAGE
        self._end = (address + size) // _PAGE * _PAGE
        self._next = self._start        # the first step nobody has taken
        self._taken: set[int] = set()   # the steps being faulted in now
        self._failed = False
        self._stopped = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="agefast-populate", daemon=True)
        self._thread.start()

    def _done(self) -> int:
        """Every page below this is in, or will not be (madvise refused)."""
        return self._end if self._failed else min(self._taken, default=self._next)

    def _take(self, below: int) -> int | None:
        """The next step, now the calling thread's to fault in, if it starts below `below`; under the lock."""
        if self._failed or self._stopped or self._next >= below:
            return None
        at = self._next
        self._next = min(at + _STEP, self._end)
        self._taken.add(at)
        return at

    def _fault_in(self, at: int) -> None:
        failed = self._madvise(at, min(_STEP, self._end - at), _MADV_POPULATE_WRITE) != 0
        with self._changed:
            self._taken.discard(at)
            self._failed = self._failed or failed
            self._changed.notify_all()

    def _run(self) -> None:
        while True:
            with self._changed:
                at = self._take(self._end)
            if at is None:
                return
            self._fault_in(at)

    def ready(self, end: int) -> bool:
        """Return once the pages below offset `end` are in (or will not be), faulting in those nobody has
        taken; whether they were not all in at the call."""
        want = min(self._address + end, self._end)
        waited = False
        while True:
            with self._changed:
                if self._done() >= want:
                    return waited
                waited = True
                at = self._take(want)
                if at is None:      # the rest is being faulted in by the thread
                    self._changed.wait()
                    continue
            self._fault_in(at)

    def stop(self) -> None:
        self._stopped = True
        self._thread.join()


def new_bytes(size: int, fill: Fill) -> bytes:
    """A new bytes object of `size` bytes, written in place by fill(view, ready).

    fill must write every byte of the writable memoryview it is given,
    calling ready(n) before it writes into view[:n]; the view is released
    when fill returns, and if fill raises the object is dropped unseen (it
    may hold uninitialised memory).
    """
    try:
        return _new_bytes(size, fill)
    except BaseException as failed:
        # The traceback keeps the failed fill's frames, and with them any
        # views of the result they made: clear them, so that nothing of the
        # result stays lent. Kept in a reference cycle (`except E as e:
        # kept = e`), a BytesIO whose buffer was still lent crashed the
        # collector of CPython 3.12.1 (python/cpython#111049); the raw
        # result's views would outlive the bytes they point into. (traceback
        # imported here: 3.8 ms, and only a failure needs it.)
        import traceback

        traceback.clear_frames(failed.__traceback__)
        raise


def _new_bytes(size: int, fill: Fill) -> bytes:
    api = _ctypes() if size >= _RAW_MIN else None
    if api is None:
        # BytesIO lends a view of its own buffer and returns that very buffer
        # as the bytes object: written once after the zero-fill, no copy.
        out = io.BytesIO()
        if size:
            out.seek(size - 1)
            out.write(b"\0")
        with out.getbuffer() as view:
            fill(view, ready_now)
        return out.getvalue()
    ctypes, new_uninitialised, madvise = api
    result: bytes = new_uninitialised(None, size)
    address = ctypes.cast(ctypes.c_char_p(result), ctypes.c_void_p).value
    populator = None if madvise is None else _Populator(madvise, address, size)
    try:
        with memoryview((ctypes.c_char * size).from_address(address)).cast("B") as view:
            fill(view, ready_now if populator is None else populator.ready)
    finally:
        if populator is not None:
            populator.stop()
    return result
