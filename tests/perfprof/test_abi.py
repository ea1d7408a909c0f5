"""perf_event_attr layout and constants against <linux/perf_event.h>.

Expected numbers are literals read off the header (struct perf_event_attr,
PERF_ATTR_SIZE_VER7), not computed from perfprof's own struct.
"""

import ctypes

import pytest

from perfprof import _abi
from perfprof.errors import PerfUnavailableError

HEADER_OFFSETS = {
    "type": 0,
    "size": 4,
    "config": 8,
    "sample_period": 16,
    "sample_type": 24,
    "read_format": 32,
    "disabled": 40,  # first bit of the flags __u64
    "wakeup_events": 48,
    "bp_type": 52,
    "config1": 56,
    "config2": 64,
    "branch_sample_type": 72,
    "sample_regs_user": 80,
    "sample_stack_user": 88,
    "clockid": 92,
    "sample_regs_intr": 96,
    "aux_watermark": 104,
    "sample_max_stack": 108,
    "aux_sample_size": 112,
    "sig_data": 120,
}


def test_size_is_perf_attr_size_ver7():
    assert ctypes.sizeof(_abi.PerfEventAttr) == 128 == _abi.PERF_ATTR_SIZE_VER7


@pytest.mark.parametrize(("field", "offset"), HEADER_OFFSETS.items())
def test_field_offset_matches_header(field, offset):
    assert getattr(_abi.PerfEventAttr, field).offset == offset


@pytest.mark.parametrize(
    ("flag", "bit"),
    [("disabled", 0), ("inherit", 1), ("exclude_kernel", 5), ("exclude_hv", 6), ("enable_on_exec", 12),
     ("precise_ip", 15), ("sample_id_all", 18), ("sigtrap", 37)],
)
def test_flag_bit_position_in_the_u64_at_40(flag, bit):
    attr = _abi.PerfEventAttr()
    setattr(attr, flag, 1)
    raw = bytes(attr)
    assert int.from_bytes(raw[40:48], "little") == 1 << bit
    assert raw[:40] == bytes(40) and raw[48:] == bytes(80)


def test_ioctl_and_format_constants():
    # _IO('$', n) and _IOR('$', 7, __u64 *) expanded by hand from asm-generic/ioctl.h.
    assert (_abi.PERF_EVENT_IOC_ENABLE, _abi.PERF_EVENT_IOC_DISABLE, _abi.PERF_EVENT_IOC_RESET) == (0x2400, 0x2401, 0x2403)
    assert _abi.PERF_EVENT_IOC_ID == 0x80082407
    assert (_abi.PERF_FORMAT_TOTAL_TIME_ENABLED, _abi.PERF_FORMAT_TOTAL_TIME_RUNNING,
            _abi.PERF_FORMAT_ID, _abi.PERF_FORMAT_GROUP) == (1, 2, 4, 8)
    assert _abi.PERF_FLAG_FD_CLOEXEC == 8


def test_syscall_numbers():
    assert _abi.syscall_number("x86_64") == 298
    assert _abi.syscall_number("aarch64") == 241


def test_unknown_machine_is_a_typed_error():
    with pytest.raises(PerfUnavailableError, match="riscv64"):
        _abi.syscall_number("riscv64")
