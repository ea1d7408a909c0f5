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

# A task: what a worker runs (it never raises), and the lock released when it is done.
_Task = tuple[Callable[[], None], threading.Lock]
_tasks: "queue.SimpleQueue[_Task] | None" = None     # the worker threads' queue, once started
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


def _work(tasks: "queue.SimpleQueue[_Task]") -> None:
    while True:
        run, done = tasks.get()
        try:
            run()
        finally:
            done.release()


_Span = TypeVar("_Span")
_Result = TypeVar("_Result")


def map_spans(function: Callable[[_Span], _Result], spans: list[_Span], threads: int) -> list[_Result]:
    """[function(span) for span in spans], on `threads` threads (no more than spans): this one and
    threads - 1 workers.

    Thread i runs span i, then takes the next span nobody has taken until none
    is left, so a thread that another process slows down runs fewer of them
    instead of holding up the others (fixed shares, one per thread, had made
    two threads no faster than one beside one busy process on two cores:
    benchmarks/HISTORY.md, 2026-12-06). A thread whose span raised takes no
    more; the first exception by span is raised once every thread is done.
    The workers are daemon threads started on first need and kept.
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
    left = iter(range(threads, len(spans)))
    taking = threading.Lock()

    def run(i: int) -> None:
        # Whatever raises here lands in results (and is raised by map_spans), so a worker never ends.
        try:
            while True:
                results[i] = function(spans[i])
                with taking:
                    taken = next(left, None)
                if taken is None:
                    return
                i = taken
        except BaseException as e:
            results[i] = e

    waits: list[threading.Lock] = []
    for i in range(1, threads):
        done = threading.Lock()
        done.acquire()
        tasks.put((functools.partial(run, i), done))
        waits.append(done)
    try:
        run(0)
    finally:
        for done in waits:
            done.acquire()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results
