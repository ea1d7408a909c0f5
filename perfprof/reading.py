"""A snapshot of counter values, and the multiplexing scale-up behind it."""

from collections.abc import Mapping
from dataclasses import dataclass, field

from perfprof import reasons


@dataclass(frozen=True)
class Scaled:
    """One counter's value after correcting for multiplexing."""

    value: int | None
    # time_running / time_enabled: 1.0 when the counter ran the whole time.
    running_fraction: float
    # Why value is None; empty when it is a number.
    reason: str = ""


def scale(raw, time_enabled, time_running):
    """Scale a raw count by time_enabled / time_running.

    When the kernel multiplexes more events than the PMU has counters, each
    one counts only while scheduled; perf extrapolates to the whole enabled
    time.  A counter that never ran has no value at all, not a zero.
    """
    if time_running == 0:
        return Scaled(None, 0.0, reasons.never_ran(time_enabled))
    if time_running >= time_enabled:
        return Scaled(raw, 1.0)
    return Scaled(round(raw * time_enabled / time_running), time_running / time_enabled)


@dataclass(frozen=True)
class Reading(Mapping):
    """reading[name] is a count (task-clock in ns) or None; reasons[name] says why None."""

    counts: dict
    reasons: dict = field(default_factory=dict)
    # name -> time_running / time_enabled, only for counts scaled up because
    # the kernel multiplexed them.
    multiplexed: dict = field(default_factory=dict)
    # Events asked for with kernel counting that the kernel only allowed in
    # user mode (see Profiler's exclude_kernel).
    user_only: frozenset = frozenset()

    def __getitem__(self, name):
        return self.counts[name]

    def __iter__(self):
        return iter(self.counts)

    def __len__(self):
        return len(self.counts)

    @property
    def ipc(self):
        """Instructions per cycle, or None unless both were counted."""
        instructions, cycles = self.counts.get("instructions"), self.counts.get("cycles")
        if instructions is None or not cycles:
            return None
        return instructions / cycles

    def to_dict(self):
        """This reading as builtins only (dicts, lists, str, int, float, None).

        pytest-xdist sends a worker's output through execnet, which carries
        nothing else; from_dict() makes the Reading again.
        """
        return {
            "counts": dict(self.counts),
            "reasons": dict(self.reasons),
            "multiplexed": dict(self.multiplexed),
            "user_only": sorted(self.user_only),
        }

    @classmethod
    def from_dict(cls, data):
        return cls(dict(data["counts"]), dict(data["reasons"]), dict(data["multiplexed"]), frozenset(data["user_only"]))

    @classmethod
    def unavailable(cls, names, reason):
        return cls({name: None for name in names}, {name: reason for name in names})
