"""reasons: the words for a counter perf_event_open refused."""

import errno

import pytest

from perfprof import reasons

REFUSED = OSError(errno.EPERM, "Operation not permitted")


@pytest.mark.parametrize(
    ("counts_kernel", "paranoid", "privileged"),
    [
        (False, 2, False),  # user space at 2: allowed, yet refused
        (True, 1, False),  # kernel mode at 1: allowed, yet refused
        (False, -1, False),
        (True, 2, True),  # CAP_PERFMON: paranoid does not apply
        (True, None, True),
    ],
)
def test_a_refusal_paranoid_allows_blames_seccomp_or_a_security_module(counts_kernel, paranoid, privileged):
    why = reasons.open_failure(REFUSED, counts_kernel=counts_kernel, paranoid=paranoid, privileged=privileged)
    assert why.startswith("not permitted (EPERM): the kernel refused perf_event_open although ")
    assert "seccomp filter" in why and "security module" in why
    assert "sysctl" not in why


@pytest.mark.parametrize(
    ("counts_kernel", "paranoid", "needed"), [(True, 2, 1), (False, 3, 2), (True, None, 1), (False, None, 2)]
)
def test_a_refusal_paranoid_explains_names_the_setting(counts_kernel, paranoid, needed):
    why = reasons.open_failure(REFUSED, counts_kernel=counts_kernel, paranoid=paranoid, privileged=False)
    shown = "unreadable" if paranoid is None else paranoid
    assert f"perf_event_paranoid = {shown};" in why
    assert f"sysctl kernel.perf_event_paranoid={needed} or lower, or CAP_PERFMON" in why
    assert "seccomp" not in why


@pytest.mark.parametrize(("cap_eff", "privileged"), [(1 << 38, True), (1 << 21, True), (0x3fff, False), (None, False)])
def test_perfmon_capable_reads_the_effective_capabilities(monkeypatch, tmp_path, cap_eff, privileged):
    status = tmp_path / "status"
    effective = "" if cap_eff is None else f"CapEff:\t{cap_eff:016x}\n"
    status.write_text(f"Name:\tpython\n{effective}CapBnd:\t000001ffffffffff\n")
    monkeypatch.setattr(reasons, "STATUS_PATH", str(status))
    uid_map = tmp_path / "uid_map"
    uid_map.write_text("         0          0 4294967295\n")
    monkeypatch.setattr(reasons, "UID_MAP_PATH", str(uid_map))
    assert reasons.perfmon_capable() is privileged
    # In a user namespace of its own (a rootless container, unshare --user --map-root-user), its root's
    # capabilities are not those perf_event_open asks for: the reason had blamed seccomp, not the sysctl.
    uid_map.write_text("         0       1000          1\n")
    assert reasons.perfmon_capable() is False
