"""The exceptions perfprof raises; all derive from PerfprofError."""


class PerfprofError(Exception):
    """Base class: catch this to handle any perfprof failure."""


class EventListError(PerfprofError, ValueError):
    """The events list names an unknown event, repeats one, is empty, or is one string."""


class ProfilerStateError(PerfprofError, RuntimeError):
    """A Profiler method was called in the wrong state (e.g. start twice)."""


class PerfUnavailableError(PerfprofError, OSError):
    """perf_event_open cannot be called on this platform at all."""


class MarkerError(PerfprofError, ValueError):
    """A perfprof pytest marker was given a bad argument."""
