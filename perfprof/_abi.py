"""The perf_event_open kernel ABI: struct layout, constants, and the syscall.

Everything here is transcribed from <linux/perf_event.h>; the layout is
checked against literal offsets from that header in tests/perfprof.
"""

import ctypes
import functools
import os
import platform
import sys

from perfprof.errors import PerfUnavailableError

try:
    import fcntl
except ImportError:  # not Unix: perfprof still imports, and syscall_number() says why it cannot count
    fcntl = None

# The installed uapi header (and so the struct below) ends at sig_data.
# Newer kernels accept a smaller attr and treat the missing tail as zero,
# older kernels accept it as long as it is not larger than they know.
PERF_ATTR_SIZE_VER7 = 128

PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_TYPE_HW_CACHE = 3

PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
PERF_FORMAT_ID = 1 << 2
PERF_FORMAT_GROUP = 1 << 3

PERF_FLAG_FD_CLOEXEC = 1 << 3

# _IO('$', n) is (ord('$') << 8) | n; _IOR('$', 7, __u64 *) adds the read
# direction bit (2 << 30) and the argument size (8 << 16).
PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_DISABLE = 0x2401
PERF_EVENT_IOC_RESET = 0x2403
PERF_EVENT_IOC_ID = 0x80082407
PERF_IOC_FLAG_GROUP = 1

# __NR_perf_event_open per architecture (arch/*/include/uapi/asm/unistd*.h).
SYSCALL_NUMBERS = {"x86_64": 298, "aarch64": 241}

_U64 = ctypes.c_uint64


class PerfEventAttr(ctypes.Structure):
    """struct perf_event_attr, PERF_ATTR_SIZE_VER7 (128 bytes).

    Unions are declared by the member perfprof uses: sample_period (union
    with sample_freq), wakeup_events (with wakeup_watermark), config1 (with
    bp_addr), config2 (with bp_len).  The 64 flag bits share one __u64 at
    offset 40; ctypes allocates bitfields from the low bit on little-endian
    targets, which is how GCC lays out the header's bitfield.
    """

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", _U64),
        ("sample_period", _U64),
        ("sample_type", _U64),
        ("read_format", _U64),
        ("disabled", _U64, 1),
        ("inherit", _U64, 1),
        ("pinned", _U64, 1),
        ("exclusive", _U64, 1),
        ("exclude_user", _U64, 1),
        ("exclude_kernel", _U64, 1),
        ("exclude_hv", _U64, 1),
        ("exclude_idle", _U64, 1),
        ("mmap", _U64, 1),
        ("comm", _U64, 1),
        ("freq", _U64, 1),
        ("inherit_stat", _U64, 1),
        ("enable_on_exec", _U64, 1),
        ("task", _U64, 1),
        ("watermark", _U64, 1),
        ("precise_ip", _U64, 2),
        ("mmap_data", _U64, 1),
        ("sample_id_all", _U64, 1),
        ("exclude_host", _U64, 1),
        ("exclude_guest", _U64, 1),
        ("exclude_callchain_kernel", _U64, 1),
        ("exclude_callchain_user", _U64, 1),
        ("mmap2", _U64, 1),
        ("comm_exec", _U64, 1),
        ("use_clockid", _U64, 1),
        ("context_switch", _U64, 1),
        ("write_backward", _U64, 1),
        ("namespaces", _U64, 1),
        ("ksymbol", _U64, 1),
        ("bpf_event", _U64, 1),
        ("aux_output", _U64, 1),
        ("cgroup", _U64, 1),
        ("text_poke", _U64, 1),
        ("build_id", _U64, 1),
        ("inherit_thread", _U64, 1),
        ("remove_on_exec", _U64, 1),
        ("sigtrap", _U64, 1),
        ("reserved_1", _U64, 26),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", _U64),
        ("config2", _U64),
        ("branch_sample_type", _U64),
        ("sample_regs_user", _U64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", _U64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
        ("aux_sample_size", ctypes.c_uint32),
        ("reserved_3", ctypes.c_uint32),
        ("sig_data", _U64),
    ]


def syscall_number(machine=None):
    """Return __NR_perf_event_open here, or raise PerfUnavailableError."""
    if sys.platform != "linux":
        raise PerfUnavailableError(f"perf_event_open is Linux-only (this is {sys.platform})")
    machine = machine or platform.machine()
    try:
        return SYSCALL_NUMBERS[machine]
    except KeyError:
        known = ", ".join(sorted(SYSCALL_NUMBERS))
        raise PerfUnavailableError(
            f"no perf_event_open syscall number for machine {machine!r} (known: {known})"
        ) from None


@functools.cache
def _libc_syscall():
    # Loaded on first use, after syscall_number() has vetted the platform,
    # so that importing perfprof works (and reports "unsupported") anywhere.
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long
    return syscall


def perf_event_open(attr, pid, cpu, group_fd, flags):
    """Open one counter; return its fd or raise OSError carrying the errno."""
    attr.size = ctypes.sizeof(PerfEventAttr)
    number = syscall_number()
    fd = _libc_syscall()(
        ctypes.c_long(number),
        ctypes.byref(attr),
        ctypes.c_long(pid),
        ctypes.c_long(cpu),
        ctypes.c_long(group_fd),
        ctypes.c_ulong(flags),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


def ioctl(fd, request, arg=0):
    """Issue a perf ioctl that takes an integer argument (ENABLE, RESET...)."""
    fcntl.ioctl(fd, request, arg)


def event_id(fd):
    """Return the kernel's id for this counter, as reported in group reads."""
    buf = bytearray(8)
    fcntl.ioctl(fd, PERF_EVENT_IOC_ID, buf, True)
    return int.from_bytes(buf, sys.byteorder)
