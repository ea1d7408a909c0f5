"""Profiler: open perf counters as groups, enable them together, read them scaled."""

import errno
import os
import struct
from dataclasses import dataclass

from perfprof import _abi, reasons
from perfprof.errors import PerfUnavailableError, ProfilerStateError
from perfprof.events import DEFAULT_EVENTS, resolve
from perfprof.reading import Reading, scale

_BASE_FORMAT = (
    _abi.PERF_FORMAT_TOTAL_TIME_ENABLED | _abi.PERF_FORMAT_TOTAL_TIME_RUNNING | _abi.PERF_FORMAT_ID
)
_U64 = struct.calcsize("Q")


@dataclass
class _Counter:
    name: str
    fd: int
    id: int


class _GroupRefusedWithInherit(Exception):
    """The kernel takes inherit only without PERF_FORMAT_GROUP (older kernels)."""


class Profiler:
    """Count perf events for the calling thread (pid=0) or the task (thread) pid.

    Counters of one kind (software, or hardware) share a group, so they are
    enabled, disabled and read in one go and cover exactly the same code.
    Hardware events get a new group when the PMU cannot fit one more.

    pid=0 counts the calling thread only; pid=N the task N only (a process's
    main thread, where N is a process id: not its other threads).
    inherit=True also counts every thread and child process the counted
    task starts after the counters are opened (threads that already exist
    are not counted).  Older kernels
    refuse inherit with PERF_FORMAT_GROUP (EINVAL; perf_event_open(2): "Inherit
    does not work for some combinations of read_format values, such as
    PERF_FORMAT_GROUP"); perfprof then opens each counter on its own, still
    with inherit, and reads them one by one.

    exclude_kernel=True (the default) counts user space only, which
    perf_event_paranoid=2 allows without privilege.  task-clock is the
    exception: it is the task's whole on-CPU time, kernel time included,
    whatever exclude_kernel says.  context-switches and
    cpu-migrations happen only in the kernel, so they are always opened
    with kernel counting and come back None with a reason where that is not
    allowed.  exclude_kernel=False counts the kernel too; an event the
    kernel refuses that way is reopened user-only and listed in
    reading.user_only.  The hypervisor is always excluded.

    enable_on_exec=True leaves the counters off until the process pid
    calls exec (how the CLI measures a command from its first instruction).

    The counters belong to the process that opened them.  A child forked
    while they are open shares their file descriptors, so an ioctl there
    would switch off the parent's counting: in the child, close() only
    closes its copies and every other method raises ProfilerStateError.
    """

    def __init__(self, events=DEFAULT_EVENTS, *, pid=0, inherit=False, exclude_kernel=True, enable_on_exec=False):
        self._specs = resolve(events)
        self.names = tuple(spec.name for spec in self._specs)
        self.pid = pid
        self.inherit = inherit
        self.exclude_kernel = exclude_kernel
        self.enable_on_exec = enable_on_exec
        self._state = "new"
        self._grouped = True
        self._groups = []
        self._failed = {}
        self._user_only = set()
        self._unavailable = ""
        self._final = None
        # The process that opened the counters; set by open().
        self._opener = None

    # -- lifecycle -----------------------------------------------------

    def open(self):
        """Open every counter, disabled; failures become None-with-reason."""
        self._require("new")
        self._state = "open"
        self._opener = os.getpid()
        try:
            _abi.syscall_number()
        except PerfUnavailableError as err:
            self._unavailable = str(err)
            return self
        try:
            self._open_all(grouped=True)
        except _GroupRefusedWithInherit:
            self._close_fds()
            self._open_all(grouped=False)
        return self

    def start(self):
        """Zero the counters and start counting (opening them first if needed)."""
        if self._state == "new":
            self.open()
        self._require("open", "stopped")
        self._each_leader(_abi.PERF_EVENT_IOC_RESET)
        self._each_leader(_abi.PERF_EVENT_IOC_ENABLE)
        self._state = "running"
        return self

    def stop(self):
        """Stop counting and return the reading at that point."""
        self._require("running")
        self._each_leader(_abi.PERF_EVENT_IOC_DISABLE)
        self._state = "stopped"
        return self.read()

    def close(self):
        """Stop if running, keep the last reading for read(), release the fds."""
        if self._state == "closed":
            return
        if self._forked():
            # A forked child: the kernel objects are the parent's; drop our copies.
            self._close_fds()
            self._state = "closed"
            return
        if self._state == "running":
            self.stop()
        if self._state != "new":
            self._final = self.read()
        self._close_fds()
        self._state = "closed"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # -- reading -------------------------------------------------------

    def read(self):
        """Return a Reading; after close(), the reading taken at close."""
        if self._final is not None:
            return self._final
        self._require("open", "running", "stopped")
        if self._unavailable:
            return Reading.unavailable(self.names, self._unavailable)
        counts, why, multiplexed = {}, dict(self._failed), {}
        for group in self._groups:
            for name, scaled in _read_group(group, grouped=self._grouped).items():
                if scaled.reason:
                    why[name] = scaled.reason
                if scaled.running_fraction < 1.0 and scaled.value is not None:
                    multiplexed[name] = scaled.running_fraction
                counts[name] = scaled.value
        ordered = {name: counts.get(name) for name in self.names}
        return Reading(ordered, why, multiplexed, frozenset(self._user_only))

    # -- internals -----------------------------------------------------

    def _forked(self):
        return self._opener is not None and self._opener != os.getpid()

    def _require(self, *states):
        if self._forked():
            raise ProfilerStateError(
                f"the counters belong to process {self._opener} (opened before a fork); this is process {os.getpid()}"
            )
        if self._state not in states:
            raise ProfilerStateError(f"profiler is {self._state}; this needs it {' or '.join(states)}")

    def _open_all(self, grouped):
        self._grouped = grouped
        self._groups, self._failed, self._user_only = [], {}, set()
        paranoid, privileged = reasons.read_paranoid(), reasons.perfmon_capable()
        # Software events never compete for PMU counters, so they get a group
        # of their own that a too-full hardware group cannot starve.
        current = {}  # is_software -> the group new events of that kind join
        for spec in self._specs:
            kind = spec.type == _abi.PERF_TYPE_SOFTWARE
            group = current.get(kind) if grouped else None
            try:
                counter, joined = self._open_counter(spec, group)
            except OSError as err:
                counts_kernel = not self._excludes_kernel(spec)
                self._failed[spec.name] = reasons.open_failure(
                    err, counts_kernel=counts_kernel, paranoid=paranoid, privileged=privileged
                )
                continue
            if joined:
                group.append(counter)
            else:
                current[kind] = [counter]
                self._groups.append(current[kind])

    def _open_counter(self, spec, group):
        """Open spec in group (or as a new leader); return (counter, joined_group)."""
        exclude_kernel = self._excludes_kernel(spec)
        try:
            return self._open_with(spec, group, exclude_kernel), group is not None
        except OSError as err:
            if group is not None and err.errno == errno.EINVAL and spec.type != _abi.PERF_TYPE_SOFTWARE:
                # x86 and arm PMUs check at open time that the whole group
                # fits in their counters; EINVAL means "start another group".
                return self._open_with(spec, None, exclude_kernel), False
            if reasons.is_permission_error(err) and not exclude_kernel and not spec.kernel_only:
                # perf_event_paranoid >= 2 allows this event in user mode only.
                counter = self._open_with(spec, group, True)
                self._user_only.add(spec.name)
                return counter, group is not None
            raise

    def _excludes_kernel(self, spec):
        """The exclude_kernel bit spec is opened with."""
        if spec.kernel_only:
            return False
        return self.exclude_kernel or spec.ignores_exclude_kernel

    def _open_with(self, spec, group, exclude_kernel):
        leader = group is None
        attr = self._attr(spec, leader, exclude_kernel, self._grouped)
        try:
            fd = _abi.perf_event_open(attr, self.pid, -1, -1 if leader else group[0].fd, _abi.PERF_FLAG_FD_CLOEXEC)
        except OSError as err:
            if leader and self._grouped and self.inherit and err.errno == errno.EINVAL:
                if self._opens(self._attr(spec, leader, exclude_kernel, grouped=False)):
                    raise _GroupRefusedWithInherit from err
            raise
        try:
            return _Counter(spec.name, fd, _abi.event_id(fd))
        except BaseException:
            os.close(fd)
            raise

    def _attr(self, spec, leader, exclude_kernel, grouped):
        attr = _abi.PerfEventAttr()
        attr.type = spec.type
        attr.config = spec.config
        attr.read_format = _BASE_FORMAT | (_abi.PERF_FORMAT_GROUP if grouped else 0)
        # Members stay "enabled" and follow their leader, as perf does, so
        # the leader alone (with PERF_IOC_FLAG_GROUP, or exec) switches all.
        attr.disabled = leader
        attr.enable_on_exec = leader and self.enable_on_exec
        attr.inherit = self.inherit
        attr.exclude_kernel = exclude_kernel
        attr.exclude_hv = 1
        return attr

    def _opens(self, attr):
        """Whether the kernel accepts attr as a group leader (probe, closed at once)."""
        try:
            os.close(_abi.perf_event_open(attr, self.pid, -1, -1, _abi.PERF_FLAG_FD_CLOEXEC))
            return True
        except OSError:
            return False

    def _each_leader(self, request):
        for group in self._groups:
            _abi.ioctl(group[0].fd, request, _abi.PERF_IOC_FLAG_GROUP)

    def _close_fds(self):
        for group in self._groups:
            for counter in group:
                os.close(counter.fd)
        self._groups = []


def _read_group(group, grouped):
    """Read one group's counters; return name -> Scaled."""
    if not grouped:
        (counter,) = group
        value, enabled, running, _ = struct.unpack("4Q", os.read(group[0].fd, 4 * _U64))
        return {counter.name: scale(value, enabled, running)}
    size = (3 + 2 * len(group)) * _U64
    data = os.read(group[0].fd, size)
    nr, enabled, running = struct.unpack_from("3Q", data)
    by_id = {counter.id: counter.name for counter in group}
    values = struct.unpack_from(f"{2 * nr}Q", data, 3 * _U64)
    return {by_id[ident]: scale(value, enabled, running) for value, ident in zip(values[::2], values[1::2])}
