"""The pytest plugin, run in an inner pytest session through pytester."""

import inspect
import itertools
import json
import pathlib
from types import SimpleNamespace

import pytest

import perfprof
from perfprof import Reading
from perfprof.pytest_plugin import SessionCounters, XdistRows
from required import need_module

pytest_plugins = ["pytester"]

# The conftest's burn_cpu is appended to this source.
MEASURED = """
import threading
import time
import pytest

@pytest.mark.perfprof_bytes(1 << 20)
def test_declares_a_mebibyte():
    burn_cpu(0.05)

def test_threaded():
    worker = threading.Thread(target=burn_cpu, args=(0.1,))
    worker.start()
    worker.join()

"""


@pytest.fixture
def measured(pytester, spin):
    """An inner test file: a test declaring bytes, and one with a worker thread."""
    pytester.makepyfile(test_measured=MEASURED + inspect.getsource(spin))


def run(pytester, *args):
    # Inline runs re-import every autoloaded plugin; the others installed
    # here (hypothesis, benchmark) cost a second each and are not under test.
    return pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:benchmark", *args)


def table_rows(lines):
    """The per-test rows of the --perfprof table: test id -> cells."""
    start = next(i for i, line in enumerate(lines) if "perfprof: per-test counters" in line)
    rows = itertools.takewhile(lambda line: "::" in line, lines[start + 3:])
    return {line.split()[0]: line.split()[1:] for line in rows}


def test_without_the_terminal_plugin_the_rows_take_the_reports_outcome(pytester, measured):
    # No plugin words a report's status then (pytest_report_teststatus gives None): unpacking it had been an
    # INTERNALERROR.
    result = run(pytester, "--perfprof", "-p", "no:terminal")
    assert result.ret == 0


def test_perfprof_option_prints_a_per_test_table(pytester, measured):
    result = run(pytester, "--perfprof")
    result.assert_outcomes(passed=2)
    rows = table_rows(result.outlines)
    assert set(rows) == {"test_measured.py::test_declares_a_mebibyte", "test_measured.py::test_threaded"}
    outcome, clock, ipc, per_byte = rows["test_measured.py::test_declares_a_mebibyte"]
    assert outcome == "passed" and float(clock) >= 40
    # Worker threads count: the main thread only waits in join().
    assert float(rows["test_measured.py::test_threaded"][1]) >= 80
    # IPC and cycles/byte need a PMU; without one they say n/a, and why.
    if ipc == "n/a":
        assert per_byte == "n/a"
        result.stdout.fnmatch_lines(["cycles: *"])
    else:
        assert float(ipc) > 0 and float(per_byte) > 0


def test_the_table_gives_each_tests_outcome(pytester):
    pytester.makepyfile(
        test_outcomes="""
        import pytest

        def test_passes():
            pass

        def test_fails():
            assert False

        def test_skips():
            pytest.skip("not here")

        @pytest.mark.xfail
        def test_xfails():
            assert False
        """
    )
    result = run(pytester, "--perfprof")
    result.assert_outcomes(passed=1, failed=1, skipped=1, xfailed=1)
    outcomes = {test.partition("::")[2]: cells[0] for test, cells in table_rows(result.outlines).items()}
    assert outcomes == {
        "test_passes": "passed", "test_fails": "failed", "test_skips": "skipped", "test_xfails": "xfailed"
    }


def test_no_table_without_the_option(pytester, measured):
    result = run(pytester)
    result.assert_outcomes(passed=2)
    assert "perfprof: per-test counters" not in result.stdout.str()


def test_marker_is_registered(pytester):
    result = run(pytester, "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.perfprof_bytes(n):*"])


@pytest.mark.parametrize("arg", ["0", "'many'", "1, 2"])
def test_bad_byte_marker_fails_the_test(pytester, arg):
    pytester.makepyfile(f"import pytest\n@pytest.mark.perfprof_bytes({arg})\ndef test_x():\n    pass\n")
    result = run(pytester, "--perfprof")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*MarkerError*perfprof_bytes*"])


def test_the_byte_marker_is_read_only_under_perfprof(pytester):
    pytester.makepyfile("import pytest\n@pytest.mark.perfprof_bytes(0)\ndef test_x():\n    pass\n")
    run(pytester).assert_outcomes(passed=1)


def test_perf_counters_fixture_gives_started_profilers(pytester):
    pytester.makepyfile(
        """
        import mmap

        def test_uses_fixture(perf_counters):
            profiler = perf_counters(["task-clock", "page-faults"])
            # New anonymous pages, each written once: a bytearray could take heap
            # pages the (inline) process had already faulted in, and fault none.
            memory = mmap.mmap(-1, 8 << 20)
            for at in range(0, len(memory), 4096):
                memory[at] = 1
            reading = profiler.read()
            assert reading["task-clock"] > 0 and reading["page-faults"] > 0
            assert perf_counters().read()["task-clock"] is not None
        """
    )
    run(pytester).assert_outcomes(passed=1)


def test_an_xdist_workers_rows_reach_the_controller_as_plain_data():
    reading = Reading(
        {"task-clock": 12_000_000, "page-faults": 7, "cycles": None},
        {"cycles": "not supported by this machine"},
        {"page-faults": 0.5},
        frozenset({"page-faults"}),
    )
    worker = SessionCounters(config=None)
    worker.rows.append(("test_a.py::test_a", "passed", reading, 1 << 20))
    worker_session = SimpleNamespace(config=SimpleNamespace(workeroutput={}))
    worker.pytest_sessionfinish(worker_session)
    # execnet carries builtins only: what survives JSON survives it.
    sent = json.loads(json.dumps(worker_session.config.workeroutput))
    controller = SessionCounters(config=None)
    XdistRows(controller).pytest_testnodedown(SimpleNamespace(workeroutput=sent), None)
    # A worker that died has no workeroutput; it adds no rows.
    XdistRows(controller).pytest_testnodedown(SimpleNamespace(), "crashed")
    assert controller.rows == [("test_a.py::test_a", "passed", reading, 1 << 20)]


def test_perfprof_with_xdist_prints_every_workers_rows(pytester, measured, monkeypatch):
    need_module("xdist")
    # The inner session and its workers import the perfprof under test.
    monkeypatch.setenv("PYTHONPATH", str(pathlib.Path(perfprof.__file__).parent.parent))
    result = pytester.runpytest_subprocess("-p", "no:hypothesispytest", "-p", "no:benchmark", "--perfprof", "-n", "2")
    result.assert_outcomes(passed=2)
    rows = table_rows(result.outlines)
    assert set(rows) == {"test_measured.py::test_declares_a_mebibyte", "test_measured.py::test_threaded"}
    assert float(rows["test_measured.py::test_threaded"][1]) >= 80
