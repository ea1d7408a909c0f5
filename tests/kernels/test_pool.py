"""The kernels' thread pool: spans taken in turn, results in order, the first exception raised."""

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
