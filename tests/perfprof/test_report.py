"""The text tables: perf stat's, and --perfprof's per-test table."""

from perfprof import Reading
from perfprof.report import per_test_table


def test_the_per_test_table_gives_the_outcome_and_cuts_long_ids_in_the_middle():
    long_id = "tests/test_long.py::test_each[" + "x" * 150 + "-end]"
    rows = [
        ("test_a.py::test_a", "passed", Reading({"task-clock": 2_500_000}), None),
        (long_id, "failed", Reading({"task-clock": 1_000_000}), None),
    ]
    lines = per_test_table(rows).splitlines()
    assert lines[0].split() == ["test", "outcome", "task-clock", "ms", "IPC", "cycles/byte"]
    assert lines[2].split()[:3] == ["test_a.py::test_a", "passed", "2.50"]
    cut, outcome, clock = lines[3].split()[:3]
    assert (outcome, clock) == ("failed", "1.00")
    assert len(cut) == 80 and "…" in cut
    assert cut.startswith("tests/test_long.py::test_each[xxx") and cut.endswith("xxx-end]")
    assert len({len(line) for line in lines}) == 1 and len(lines[0]) < 130
