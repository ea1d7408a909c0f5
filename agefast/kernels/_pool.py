"""The kernels' thread pool: a batch's ranges run on this thread and on daemon workers.

A small pool of our own: concurrent.futures costs a process ~5 ms to import.
"""

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..io import portable

if TYPE_CHECKING:
    import queue

# A task: (function, its argument, the results list, the index of its result, the lock released when done).
_Task = tuple[Callable[[Any], Any], Any, list[Any], int, threading.Lock]
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
        function, span, results, i, done = tasks.get()
        try:
            results[i] = function(span)
        except BaseException as e:
            results[i] = e
        finally:
            done.release()


_Span = TypeVar("_Span")
_Result = TypeVar("_Result")


def map_spans(function: Callable[[_Span], _Result], spans: list[_Span]) -> list[_Result]:
    """[function(span) for span in spans], in parallel: the first on this thread, the others on workers.

    The workers are daemon threads started on first need and kept.
    """
    global _tasks, _workers
    with _pool_lock:
        if _tasks is None:
            import queue

            _tasks = queue.SimpleQueue()
        while _workers < len(spans) - 1:
            threading.Thread(target=_work, args=(_tasks,), name="agefast-kernel", daemon=True).start()
            _workers += 1
        tasks = _tasks
    results: list[Any] = [None] * len(spans)
    waits: list[threading.Lock] = []
    for i in range(1, len(spans)):
        done = threading.Lock()
        done.acquire()
        tasks.put((function, spans[i], results, i, done))
        waits.append(done)
    try:
        results[0] = function(spans[0])
    finally:
        for done in waits:
            done.acquire()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results
