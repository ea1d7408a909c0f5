"""Multiplex scaling, group-read parsing, and Reading's derived values."""

import json
import os
import struct

import pytest

from perfprof import Reading, scale
from perfprof.profiler import _Counter, _read_group


@pytest.mark.parametrize(
    ("raw", "enabled", "running", "value", "fraction"),
    [
        (1000, 500, 500, 1000, 1.0),  # ran the whole time: no scaling
        (1000, 600, 200, 3000, 1 / 3),  # ran a third of the time
        (7, 4, 3, 9, 0.75),  # 9.33 rounds to 9
        (0, 100, 100, 0, 1.0),  # a counted zero is a real zero
    ],
)
def test_scale(raw, enabled, running, value, fraction):
    scaled = scale(raw, enabled, running)
    assert (scaled.value, scaled.reason) == (value, "")
    assert scaled.running_fraction == pytest.approx(fraction)


@pytest.mark.parametrize(
    ("enabled", "why"),
    [(0, "never enabled"), (0, "counts only the thread that opened it"), (100, "never scheduled")],
)
def test_counter_that_never_ran_has_no_value(enabled, why):
    scaled = scale(0, enabled, 0)
    assert scaled.value is None and why in scaled.reason


def _pipe_with(data):
    read_fd, write_fd = os.pipe()
    os.write(write_fd, data)
    os.close(write_fd)
    return read_fd


def test_group_read_is_matched_by_id_and_scaled():
    # nr, time_enabled, time_running, then {value, id} per member, in an
    # order different from the group's so that matching by id matters.
    fd = _pipe_with(struct.pack("9Q", 3, 1000, 250, 40, 12, 10, 11, 0, 13))
    group = [_Counter("a", fd, 11), _Counter("b", -1, 12), _Counter("c", -1, 13)]
    try:
        scaled = _read_group(group, grouped=True)
    finally:
        os.close(fd)
    assert {name: s.value for name, s in scaled.items()} == {"a": 40, "b": 160, "c": 0}
    assert {s.running_fraction for s in scaled.values()} == {0.25}


def test_ungrouped_read_layout():
    fd = _pipe_with(struct.pack("4Q", 50, 200, 100, 99))
    try:
        scaled = _read_group([_Counter("a", fd, 99)], grouped=False)
    finally:
        os.close(fd)
    assert scaled["a"].value == 100 and scaled["a"].running_fraction == 0.5


def test_ipc_needs_both_counts():
    assert Reading({"instructions": 300, "cycles": 100}).ipc == 3.0
    assert Reading({"instructions": 300, "cycles": None}, {"cycles": "x"}).ipc is None
    assert Reading({"task-clock": 5}).ipc is None


def test_reading_is_a_mapping():
    reading = Reading.unavailable(["cycles", "task-clock"], "no PMU")
    assert dict(reading) == {"cycles": None, "task-clock": None}
    assert reading.reasons == {"cycles": "no PMU", "task-clock": "no PMU"}


def test_reading_round_trips_through_plain_data():
    reading = Reading({"task-clock": 5, "page-faults": 3, "cycles": None}, {"cycles": "no PMU"},
                      {"page-faults": 0.25}, frozenset({"page-faults"}))
    plain = json.loads(json.dumps(reading.to_dict()))
    assert Reading.from_dict(plain) == reading
    assert list(Reading.from_dict(plain)) == ["task-clock", "page-faults", "cycles"]
