"""perfprof: count perf events (perf_event_open) from inside a Python process.

    with perfprof.Profiler(["task-clock", "page-faults"]) as prof:
        work()
    reading = prof.read()
    reading["task-clock"]   # ns, or None; reading.reasons says why None
"""

from perfprof.errors import EventListError, MarkerError, PerfprofError, PerfUnavailableError, ProfilerStateError
from perfprof.events import DEFAULT_EVENTS, EVENTS
from perfprof.profiler import Profiler
from perfprof.reading import Reading, Scaled, scale

__all__ = [
    "DEFAULT_EVENTS",
    "EVENTS",
    "EventListError",
    "MarkerError",
    "PerfUnavailableError",
    "PerfprofError",
    "Profiler",
    "ProfilerStateError",
    "Reading",
    "Scaled",
    "scale",
]
