"""Why a counter could not be opened, in words a user can act on."""

import errno

PARANOID_PATH = "/proc/sys/kernel/perf_event_paranoid"
STATUS_PATH = "/proc/self/status"
UID_MAP_PATH = "/proc/self/uid_map"

# Either capability lifts the perf_event_paranoid limits (CAP_PERFMON from
# Linux 5.8; CAP_SYS_ADMIN before it and still).
_CAP_SYS_ADMIN = 21
_CAP_PERFMON = 38

_NOT_SUPPORTED = {errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV}
_NOT_PERMITTED = {errno.EACCES, errno.EPERM}


def read_paranoid():
    """Return kernel.perf_event_paranoid, or None if the file is absent."""
    try:
        with open(PARANOID_PATH) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def in_the_first_user_namespace():
    """Whether this process is in the machine's own user namespace, whose uid_map maps every id to itself (a
    kernel without user namespaces has no uid_map: the machine's, then)."""
    try:
        with open(UID_MAP_PATH) as f:
            return f.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return True


def perfmon_capable():
    """Whether this process has CAP_PERFMON or CAP_SYS_ADMIN in effect where perf_event_open looks for them: in
    the machine's own user namespace (root, outside a container, has both). A user namespace's root (a rootless
    container's, unshare --user) has them there alone, which perf_event_paranoid does not heed."""
    if not in_the_first_user_namespace():
        return False
    try:
        with open(STATUS_PATH) as f:
            for line in f:
                if line.startswith("CapEff:"):
                    effective = int(line.split()[1], 16)
                    return bool(effective & (1 << _CAP_PERFMON | 1 << _CAP_SYS_ADMIN))
    except (OSError, ValueError, IndexError):
        pass
    return False


def is_permission_error(err):
    return err.errno in _NOT_PERMITTED


def open_failure(err, *, counts_kernel, paranoid, privileged):
    """Explain an OSError from perf_event_open for one event.

    privileged: the process has CAP_PERFMON or CAP_SYS_ADMIN (perfmon_capable()).
    """
    if err.errno in _NOT_SUPPORTED:
        return f"not supported by this machine ({errno.errorcode[err.errno]}: no PMU provides this event)"
    if err.errno in _NOT_PERMITTED:
        # perf_event_paranoid: 2 allows user-space counting of your own
        # processes, 1 adds kernel-mode counting, 0 CPU-wide, -1 everything.
        needed = 1 if counts_kernel else 2
        what = "kernel-mode counting" if counts_kernel else "counting your own processes"
        refused = f"not permitted ({errno.errorcode[err.errno]})"
        if privileged or (paranoid is not None and paranoid <= needed):
            # Then the sysctl is not what refused: a seccomp filter (Docker's
            # default answers EPERM) or an LSM hook stops the call first.
            allowed_by = (
                "this process has CAP_PERFMON or CAP_SYS_ADMIN"
                if privileged
                else f"perf_event_paranoid = {paranoid} allows {what}"
            )
            return (
                f"{refused}: the kernel refused perf_event_open although {allowed_by}; "
                "a seccomp filter (a container's) or a security module (SELinux, AppArmor) may block perf_event_open"
            )
        setting = "unreadable" if paranoid is None else str(paranoid)
        return (
            f"{refused}: perf_event_paranoid = {setting}; "
            f"{what} needs sysctl kernel.perf_event_paranoid={needed} or lower, or CAP_PERFMON"
        )
    name = errno.errorcode.get(err.errno, str(err.errno))
    return f"perf_event_open failed ({name}: {err.strerror})"


def never_ran(time_enabled):
    """Explain a counter that was open but never counted."""
    if time_enabled == 0:
        # A task's counter adds to time_enabled only while that task is on a CPU.
        return (
            "never enabled: the counted code did not run while the counter was on; "
            "a pid=0 counter counts only the thread that opened it, so the work may have run on another thread"
        )
    return (
        "never scheduled: the PMU had no free counter for this group while it was enabled; "
        "ask for fewer hardware events"
    )
