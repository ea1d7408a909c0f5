"""The event-name table and its validation."""

import pytest

import perfprof
from perfprof import EVENTS, EventListError, Profiler, errors
from perfprof.events import resolve


def test_issue_event_names_are_all_known():
    assert set(EVENTS) == {
        "cycles", "instructions", "branches", "branch-misses", "cache-references", "cache-misses",
        "L1-dcache-loads", "L1-dcache-load-misses", "task-clock", "page-faults", "context-switches",
        "cpu-migrations",
    }


@pytest.mark.parametrize(
    ("name", "type_", "config"),
    [
        ("cycles", 0, 0),
        ("branch-misses", 0, 5),
        ("L1-dcache-loads", 3, 0x0),  # L1D | OP_READ << 8 | RESULT_ACCESS << 16
        ("L1-dcache-load-misses", 3, 0x10000),  # L1D | OP_READ << 8 | RESULT_MISS << 16
        ("task-clock", 1, 1),
        ("cpu-migrations", 1, 4),
    ],
)
def test_type_and_config_from_header(name, type_, config):
    assert (EVENTS[name].type, EVENTS[name].config) == (type_, config)


@pytest.mark.parametrize(
    ("names", "match"), [(["task-clock", "nope"], "unknown event 'nope'"), (["cycles", "cycles"], "twice"), ([], "no events")]
)
def test_bad_event_lists(names, match):
    with pytest.raises(EventListError, match=match):
        resolve(names)


def test_a_single_string_is_an_event_list_error():
    with pytest.raises(EventListError, match="sequence of names"):
        Profiler("task-clock")


def test_every_error_class_is_exported_and_a_perfprof_error():
    classes = {name for name, obj in vars(errors).items() if isinstance(obj, type) and issubclass(obj, Exception)}
    assert classes <= set(perfprof.__all__)
    assert all(issubclass(getattr(perfprof, name), perfprof.PerfprofError) for name in classes)
