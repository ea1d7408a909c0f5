"""perf's event names mapped to perf_event_attr (type, config)."""

from dataclasses import dataclass

from perfprof import _abi
from perfprof.errors import EventListError


@dataclass(frozen=True)
class EventSpec:
    name: str
    type: int
    config: int
    # The kernel raises these software events from scheduler code, with
    # kernel registers, so exclude_kernel=1 would filter every one of them
    # and leave a count of 0 that means nothing.
    kernel_only: bool = False
    # task-clock is the task's on-CPU time, user and kernel alike: the kernel
    # ignores exclude_kernel when counting it (the bit only filters its
    # samples), so it is opened user-only, as perf_event_paranoid 2 (and below) allows.
    ignores_exclude_kernel: bool = False


def _hw_cache(cache, op, result):
    # PERF_TYPE_HW_CACHE config is cache_id | (op_id << 8) | (result_id << 16).
    return cache | (op << 8) | (result << 16)


_L1D, _OP_READ, _ACCESS, _MISS = 0, 0, 0, 1

EVENTS = {
    spec.name: spec
    for spec in (
        EventSpec("cycles", _abi.PERF_TYPE_HARDWARE, 0),
        EventSpec("instructions", _abi.PERF_TYPE_HARDWARE, 1),
        EventSpec("cache-references", _abi.PERF_TYPE_HARDWARE, 2),
        EventSpec("cache-misses", _abi.PERF_TYPE_HARDWARE, 3),
        EventSpec("branches", _abi.PERF_TYPE_HARDWARE, 4),
        EventSpec("branch-misses", _abi.PERF_TYPE_HARDWARE, 5),
        EventSpec("L1-dcache-loads", _abi.PERF_TYPE_HW_CACHE, _hw_cache(_L1D, _OP_READ, _ACCESS)),
        EventSpec("L1-dcache-load-misses", _abi.PERF_TYPE_HW_CACHE, _hw_cache(_L1D, _OP_READ, _MISS)),
        EventSpec("task-clock", _abi.PERF_TYPE_SOFTWARE, 1, ignores_exclude_kernel=True),
        EventSpec("page-faults", _abi.PERF_TYPE_SOFTWARE, 2),
        EventSpec("context-switches", _abi.PERF_TYPE_SOFTWARE, 3, kernel_only=True),
        EventSpec("cpu-migrations", _abi.PERF_TYPE_SOFTWARE, 4, kernel_only=True),
    )
}

# What `perf stat` shows by default, minus the stalled-cycles pair.
DEFAULT_EVENTS = (
    "task-clock",
    "context-switches",
    "cpu-migrations",
    "page-faults",
    "cycles",
    "instructions",
    "branches",
    "branch-misses",
)


def resolve(names):
    """Return the EventSpec for each name, in order, rejecting unknown and repeated names."""
    if isinstance(names, str):
        raise EventListError(f"events must be a sequence of names, not one string ({names!r}); write [{names!r}]")
    specs = []
    for name in names:
        if name not in EVENTS:
            raise EventListError(f"unknown event {name!r}; known: {', '.join(EVENTS)}")
        if any(spec.name == name for spec in specs):
            raise EventListError(f"event {name!r} given twice")
        specs.append(EVENTS[name])
    if not specs:
        raise EventListError("no events given")
    return specs
