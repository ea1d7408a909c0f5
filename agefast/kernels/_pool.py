"""The kernels' thread pool: a batch's ranges run on this thread and on daemon workers.

A small pool of our own: concurrent.futures costs a process ~5 ms to import.
"""

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..io import portable

if TYPE_CHECKING:
    import queue

# A task: what a worker runs (it never raises).
_tasks: "queue.SimpleQueue[Callable[[], None]] | None" = None     # the worker threads' queue, once started
_workers = 0
_pool_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # A forked child has only the thread that forked: the pool's workers are
    # gone (a task sent to them would wait forever) and a lock another thread
    # held stays held.
    global _tasks, _workers, _pool_lock
    _tasks, _workers = None, 0
    _pool_lock = threading.Lock()


portable.after_fork_in_child(_after_fork_in_child)


def _work(tasks: "queue.SimpleQueue[Callable[[], None]]") -> None:
    while True:
        tasks.get()()


def through_signals(wait: Callable[[], None]) -> BaseException | None:
    """wait(), called again until it returns whatever interrupts it (a signal's exception); the first
    interruption, for the caller to raise once what it waited for is over."""
    interrupted: BaseException | None = None
    while True:
        try:
            wait()
            return interrupted
        except BaseException as e:
            interrupted = interrupted or e


_Span = TypeVar("_Span")
_Result = TypeVar("_Result")


def map_spans(function: Callable[[_Span], _Result], spans: list[_Span], threads: int) -> list[_Result]:
    """[function(span) for span in spans], on `threads` threads (no more than spans): this one and
    threads - 1 workers.

    Each thread takes the next span nobody has taken until none is left, so a
    thread that another process slows down runs fewer of them instead of
    holding up the others (fixed shares, one per thread, had made two threads
    no faster than one beside one busy process on two cores:
    benchmarks/HISTORY.md, 2026-12-06). A thread whose span raised takes no
    more; the first exception by span is raised once every thread is done.

    Whatever interrupts this thread (a signal's exception, in the call or in
    the wait), no span is left running when this returns or raises: the
    spans write into buffers the caller frees then. Once this thread is done
    or interrupted, no thread takes another span; a worker that had not
    started yet starts none. The workers are daemon threads started on first
    need and kept.
    """
    global _tasks, _workers
    with _pool_lock:
        if _tasks is None:
            import queue

            _tasks = queue.SimpleQueue()
        while _workers < threads - 1:
            threading.Thread(target=_work, args=(_tasks,), name="agefast-kernel", daemon=True).start()
            _workers += 1
        tasks = _tasks
    results: list[Any] = [None] * len(spans)
    left = iter(range(len(spans)))
    turn = threading.Condition()
    stopped = False
    inside: set[object] = set()     # the workers running spans (a signal never reaches them, so they tell)

    def run(worker: bool) -> None:
        # Whatever a span raises lands in results (and is raised by map_spans), so a worker never ends; this
        # thread's signal between spans is map_spans' own to raise.
        me = object()
        i = None
        try:
            with turn:
                if stopped:
                    return
                if worker:
                    inside.add(me)
            while True:
                with turn:
                    i = None if stopped else next(left, None)
                if i is None:
                    return
                results[i] = function(spans[i])
        except BaseException as e:
            if i is None:
                raise
            results[i] = e
        finally:
            if worker:
                with turn:
                    inside.discard(me)
                    turn.notify_all()

    interrupted: BaseException | None = None
    try:
        for _ in range(threads - 1):
            tasks.put(functools.partial(run, True))
        run(False)
    except BaseException as e:      # a signal's, between the calls above
        interrupted = e

    def stop() -> None:
        nonlocal stopped
        with turn:
            stopped = True
            while inside:
                turn.wait()
    waiting = through_signals(stop)     # always, and first: the spans may be writing into the caller's buffers
    interrupted = interrupted or waiting
    if interrupted is not None:
        raise interrupted
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results
