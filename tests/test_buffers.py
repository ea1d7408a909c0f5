"""agefast.io.buffers.new_bytes: results written once, in place."""

import threading
import traceback

import pytest

from agefast.io import buffers

SIZES = [0, 1, buffers._RAW_MIN - 1, buffers._RAW_MIN, buffers._RAW_MIN + 12345]


@pytest.mark.parametrize("size", SIZES)
def test_the_result_is_what_fill_wrote(size):
    pattern = (bytes(range(251)) * (size // 251 + 1))[:size]
    views = []

    def fill(view, ready):
        views.append(view)
        assert len(view) == size and not view.readonly
        for start in range(0, size, 3 << 20):
            ready(min(start + (3 << 20), size))
            view[start:start + (3 << 20)] = pattern[start:start + (3 << 20)]

    result = buffers.new_bytes(size, fill)
    assert type(result) is bytes and result == pattern[:size]
    with pytest.raises(ValueError):  # no writable alias of the bytes survives
        views[0][:1]


def test_a_failing_fill_propagates():
    def fill(view, ready):
        ready(len(view) // 2)
        raise OSError("source gone")

    with pytest.raises(OSError, match="source gone"):
        buffers.new_bytes(buffers._RAW_MIN * 2, fill)


def _live(view: memoryview) -> bool:
    try:
        view.nbytes
    except ValueError:    # released
        return False
    return True


@pytest.mark.parametrize("size", [100, buffers._RAW_MIN])
def test_a_failing_fill_leaves_no_view_of_the_result_in_its_frames(size):
    # A traceback keeps the frames of the failed fill, and they held views of
    # the result: kept in a reference cycle (`except E as e: kept = e`), a
    # BytesIO whose buffer was still lent crashed CPython 3.12.1's collector
    # (python/cpython#111049), and the raw result's views outlived the bytes
    # they point into.
    def fill(view, ready):
        part = view[1:2]    # noqa: F841  # what a fill's frame holds when it fails
        raise OSError("source gone")

    with pytest.raises(OSError) as failed:
        buffers.new_bytes(size, fill)
    views = [value for frame, _ in traceback.walk_tb(failed.value.__traceback__)
             for value in frame.f_locals.values() if isinstance(value, memoryview)]
    assert not [view for view in views if _live(view)]


def test_a_failing_fill_stops_the_populating_thread():
    def fill(view, ready):
        raise OSError("source gone")

    with pytest.raises(OSError):
        buffers.new_bytes(buffers._RAW_MIN * 4, fill)
    assert not [t for t in threading.enumerate() if t.name == "agefast-populate"]


def test_a_step_that_waited_for_its_pages_leaves_the_populating_thread_a_core(monkeypatch):
    # threads=None: once the kernels run, every core but one for a step that had to wait for the thread
    # faulting the result in, every core for one whose pages were in first; a number of threads asked
    # for, or kernels not loaded, stay as they were.
    from agefast.io import cpus
    from agefast import kernels
    from agefast.payload.engine import Engine
    from agefast.payload.steps import beside_populating

    cryptography = Engine(None, None)
    assert beside_populating(cryptography, True) is cryptography
    monkeypatch.setattr(cpus, "count", lambda: 2)
    assert beside_populating(Engine(kernels, None), True).threads == 1
    monkeypatch.setattr(cpus, "count", lambda: 8)
    assert beside_populating(Engine(kernels, None), True).threads == 7
    assert beside_populating(Engine(kernels, 2), True).threads == 2
    assert beside_populating(Engine(kernels, None), False).threads is None


def test_ready_says_whether_it_waited_for_the_pages():
    gate = threading.Event()

    def madvise(address, size, advice):     # stands in for the kernel's: nothing is touched
        gate.wait()
        return 0

    size = 2 * buffers._STEP
    populator = buffers._Populator(madvise, 1 << 30, size)
    try:
        assert populator.ready(0) is False
        threading.Timer(0.05, gate.set).start()
        assert populator.ready(size) is True
        assert populator.ready(size) is False
    finally:
        gate.set()
        populator.stop()
    assert buffers.ready_now(size) is False


def _held_populator(calls: list, gate: threading.Event, steps: int, result: int = 0,
                    open_after: int = 0) -> buffers._Populator:
    """A _Populator over `steps` steps whose madvise stand-in records (thread name, address), returns `result`
    and holds the populating thread at its first step until `gate` is set (by the test, or by the writer's
    `open_after`th call); the populator once its thread is held there."""
    def madvise(address, size, advice):     # touches nothing
        calls.append((threading.current_thread().name, address))
        if threading.current_thread().name == "agefast-populate":
            gate.wait()
        elif sum(name != "agefast-populate" for name, _ in calls) == open_after:
            gate.set()
        return result

    populator = buffers._Populator(madvise, 1 << 30, steps * buffers._STEP)
    for _ in range(1000):
        if calls:
            return populator
        threading.Event().wait(0.001)
    gate.set()
    populator.stop()
    raise AssertionError("the populating thread never started")


def test_a_writer_faults_in_the_steps_nobody_has_taken_and_waits_for_the_rest():
    # Where the host faults pages in on two cores at once, the writer's own faults halve its wait.
    calls: list = []
    gate = threading.Event()
    populator = _held_populator(calls, gate, 4, open_after=2)
    try:
        threading.Timer(5, gate.set).start()     # a writer that takes no step would wait for the held one
        assert populator.ready(3 * buffers._STEP) is True
        mine = [address for name, address in calls if name == threading.current_thread().name]
        assert mine == [(1 << 30) + buffers._STEP, (1 << 30) + 2 * buffers._STEP]     # not the 4th: not asked for
        assert populator.ready(3 * buffers._STEP) is False
    finally:
        gate.set()
        populator.stop()
    assert sorted(address for _, address in calls) == [(1 << 30) + i * buffers._STEP for i in range(4)]


def test_a_refused_madvise_stops_every_fault_in():
    # Before Linux 5.14 madvise refuses the advice: the pages are then faulted in as they are written.
    calls: list = []
    gate = threading.Event()
    populator = _held_populator(calls, gate, 4, result=-1)
    try:
        threading.Timer(5, gate.set).start()     # a writer that takes no step would wait for the held one
        assert populator.ready(2 * buffers._STEP) is True      # the writer's own step was refused
        assert len(calls) == 2
        gate.set()
        assert populator.ready(4 * buffers._STEP) is False
    finally:
        gate.set()
        populator.stop()
    assert len(calls) == 2
