"""pytest plugin: the perf_counters fixture, and `--perfprof` per-test counts.

Registered through the pytest11 entry point `perfprof`.
"""

import pytest

from perfprof.errors import MarkerError
from perfprof.profiler import Profiler
from perfprof.reading import Reading
from perfprof.report import per_test_table

# What the --perfprof table needs: time, and IPC and cycles/byte where the
# machine has a PMU.
SESSION_EVENTS = ("task-clock", "cycles", "instructions")

# Where a pytest-xdist worker leaves its rows in config.workeroutput.
WORKER_OUTPUT_KEY = "perfprof_rows"


def pytest_addoption(parser):
    parser.getgroup("perfprof").addoption(
        "--perfprof",
        action="store_true",
        help="count perf events for every test and print a table at the end of the session",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "perfprof_bytes(n): the test processes n bytes; --perfprof reports cycles per byte"
    )
    if config.getoption("perfprof"):
        counters = SessionCounters(config)
        config.pluginmanager.register(counters, "perfprof-session")
        # pytest_testnodedown is xdist's hook; pytest fails a session whose
        # plugins implement a hook no plugin declares.
        if config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(XdistRows(counters), "perfprof-xdist")


@pytest.fixture
def perf_counters():
    """A callable taking Profiler's arguments and returning a started Profiler.

    Every profiler it made is closed when the test ends.
    """
    made = []

    def make(events=SESSION_EVENTS, **kwargs):
        made.append(Profiler(events, **kwargs).start())
        return made[-1]

    yield make
    for profiler in made:
        profiler.close()


def declared_bytes(item):
    """The n of @pytest.mark.perfprof_bytes(n) on item, or None."""
    marker = item.get_closest_marker("perfprof_bytes")
    if marker is None:
        return None
    if len(marker.args) != 1 or marker.kwargs:
        raise MarkerError(f"{item.nodeid}: perfprof_bytes takes one argument, the byte count")
    (nbytes,) = marker.args
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes <= 0:
        raise MarkerError(f"{item.nodeid}: perfprof_bytes needs a positive int, got {nbytes!r}")
    return nbytes


class SessionCounters:
    """Measures each test's call phase and prints the table at session end.

    Under pytest-xdist the tests run in worker processes: each worker hands
    its rows to the controller (XdistRows), which prints the one table.
    """

    def __init__(self, config):
        self.config = config
        # (test id, outcome, Reading, bytes or None), in the order tests ended.
        self.rows = []
        # test id -> (Reading, bytes) until the test's call report gives its outcome.
        self._measured = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        nbytes = declared_bytes(item)
        # inherit: threads the test starts are part of its cost.
        with Profiler(SESSION_EVENTS, inherit=True) as profiler:
            yield
        self._measured[item.nodeid] = (profiler.read(), nbytes)

    def pytest_runtest_logreport(self, report):
        # An xdist controller gets its workers' reports, measured over there.
        if report.when != "call" or report.nodeid not in self._measured:
            return
        reading, nbytes = self._measured.pop(report.nodeid)
        # The word pytest's summary uses: passed, failed, skipped, xfailed...
        # None where no plugin words it (pytest -p no:terminal): the report's own outcome then.
        status = self.config.hook.pytest_report_teststatus(report=report, config=self.config)
        outcome = status[0] if status else report.outcome
        self.rows.append((report.nodeid, outcome, reading, nbytes))

    def pytest_sessionfinish(self, session):
        # Only an xdist worker's config has workeroutput; xdist sends it to
        # the controller after every pytest_sessionfinish has run.
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKER_OUTPUT_KEY] = [
                {"test": test_id, "outcome": outcome, "reading": reading.to_dict(), "bytes": nbytes}
                for test_id, outcome, reading, nbytes in self.rows
            ]

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.write_sep("-", "perfprof: per-test counters (call phase)")
        if not self.rows:
            terminalreporter.write_line("no test ran")
            return
        for line in per_test_table(self.rows).splitlines():
            terminalreporter.write_line(line)
        reasons = {name: why for _, _, reading, _ in self.rows for name, why in reading.reasons.items()}
        for name, why in reasons.items():
            terminalreporter.write_line(f"{name}: {why}")


class XdistRows:
    """On the pytest-xdist controller: adds each worker's rows to the session's."""

    def __init__(self, counters):
        self.counters = counters

    def pytest_testnodedown(self, node, error):
        # A worker that crashed sent no workeroutput; its tests report the crash.
        rows = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT_KEY, [])
        self.counters.rows.extend(
            (row["test"], row["outcome"], Reading.from_dict(row["reading"]), row["bytes"]) for row in rows
        )
