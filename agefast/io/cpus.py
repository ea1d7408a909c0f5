"""How many CPUs this process may run on."""

import os


def count() -> int:
    """The CPUs this process may run on (its affinity mask where the system has one, else every CPU), at least 1."""
    process_cpu_count = getattr(os, "process_cpu_count", None)     # Python 3.13+
    if process_cpu_count is not None:
        return process_cpu_count() or 1
    affinity = getattr(os, "sched_getaffinity", None)     # Linux only
    if affinity is not None:
        return len(affinity(0))
    return os.cpu_count() or 1
