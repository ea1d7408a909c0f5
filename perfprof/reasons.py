"""Why a counter could not be opened, in words a user can act on."""

import errno

PARANOID_PATH = "/proc/sys/kernel/perf_event_paranoid"

_NOT_SUPPORTED = {errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV}
_NOT_PERMITTED = {errno.EACCES, errno.EPERM}


def read_paranoid():
    """Return kernel.perf_event_paranoid, or None if the file is absent."""
    try:
        with open(PARANOID_PATH) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def is_permission_error(err):
    return err.errno in _NOT_PERMITTED


def open_failure(err, *, counts_kernel, paranoid):
    """Explain an OSError from perf_event_open for one event."""
    if err.errno in _NOT_SUPPORTED:
        return f"not supported by this machine ({errno.errorcode[err.errno]}: no PMU provides this event)"
    if err.errno in _NOT_PERMITTED:
        # perf_event_paranoid: 2 allows user-space counting of your own
        # processes, 1 adds kernel-mode counting, 0 CPU-wide, -1 everything.
        needed = 1 if counts_kernel else 2
        what = "kernel-mode counting" if counts_kernel else "counting your own processes"
        setting = "unreadable" if paranoid is None else str(paranoid)
        return (
            f"not permitted ({errno.errorcode[err.errno]}): perf_event_paranoid = {setting}; "
            f"{what} needs sysctl kernel.perf_event_paranoid={needed} or lower, or CAP_PERFMON"
        )
    name = errno.errorcode.get(err.errno, str(err.errno))
    return f"perf_event_open failed ({name}: {err.strerror})"


def never_ran(time_enabled):
    """Explain a counter that was open but never counted."""
    if time_enabled == 0:
        return "never enabled: the counted code did not run while the counter was on"
    return (
        "never scheduled: the PMU had no free counter for this group while it was enabled; "
        "ask for fewer hardware events"
    )
