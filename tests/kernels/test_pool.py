"""The kernels' thread pool: spans taken in turn, results in order, the first exception raised."""

import signal
import threading
import time

import pytest

from agefast.kernels._pool import map_spans


def test_a_slow_span_leaves_the_others_to_the_other_thread():
    # Fixed shares would give the thread that runs span 0 spans 1-3 as well.
    ran: dict[int, int] = {}

    def run(span: int) -> int:
        ran[span] = threading.get_ident()
        time.sleep(0.5 if span == 0 else 0.001)     # half a second: room for a busy machine
        return span * span

    assert map_spans(run, list(range(8)), 2) == [span * span for span in range(8)]
    slow = ran.pop(0)
    assert slow not in ran.values()


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_results_come_in_the_order_of_the_spans(threads):
    spans = list(range(40))
    assert map_spans(lambda span: -span, spans, threads) == [-span for span in spans]


class Failed(Exception):
    pass


@pytest.mark.parametrize("threads", [1, 2])
def test_the_first_failing_span_raises_once_every_thread_is_done(threads):
    ended: list[int] = []

    def run(span: int) -> int:
        if span in (3, 5):
            raise Failed(span)
        time.sleep(0.002)
        ended.append(span)
        return span

    with pytest.raises(Failed) as raised:
        map_spans(run, list(range(8)), threads)
    assert raised.value.args == (3,)
    count = len(ended)
    time.sleep(0.05)
    assert len(ended) == count      # nothing ran on after map_spans raised


@pytest.mark.parametrize("where", ["in this thread's span", "while waiting for the workers"])
def test_a_signal_leaves_no_span_running(where):
    # Ctrl-C in the wait for the workers had raised out of map_spans with their spans still running: the
    # kernels went on writing into a buffer the caller then freed (a crash seen under a SIGINT every 0.5 ms).
    running: set[int] = set()
    after: list[int] = []
    main = threading.get_ident()
    stop = threading.Event()

    def run(span: int) -> int:
        if threading.get_ident() == main:
            if where == "in this thread's span":
                raise KeyboardInterrupt     # as a signal's handler raises it, in the span's call
            while not running:      # done once a worker is in a span: this thread is soon in the wait
                time.sleep(0.001)
            return span
        running.add(span)
        time.sleep(0.5)
        running.discard(span)
        if stop.is_set():
            after.append(span)
        return span

    timer = threading.Timer(0.1, signal.pthread_kill, (main, signal.SIGINT))
    # Python's handler, even where the tests inherited SIGINT ignored (a shell's background job).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            if where == "while waiting for the workers":
                timer.start()
            map_spans(run, list(range(40)), 3)
    finally:
        signal.signal(signal.SIGINT, previous)
    if where == "while waiting for the workers":
        timer.join()
    stop.set()
    assert running == set()
    time.sleep(0.6)
    assert after == []      # no span began after map_spans raised
