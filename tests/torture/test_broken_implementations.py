"""agetorture must pass a correct implementation and catch each classic STREAM bug."""

import pytest

from broken_stream import BUGS, broken_adapter
from torture.__main__ import PROFILES, run_torture

# Nominal (one full chunk) and Edge (a full chunk and one byte) between them
# exercise every bug; the reference alone is oracle enough for these.
STRATA = {"Nominal", "Edge"}
AXES = {"roundtrip+adversarial-io", "tamper"}


def _torture(adapter):
    run, _, _ = run_torture(adapter, PROFILES["quick"], 7, STRATA, AXES, oracles=("reference",))
    return run


def _problems(run) -> list[str]:
    return [e["problem"] for p in run.parties.values() for s in p.stats.values() for e in s.examples]


def test_correct_stream_passes():
    run = _torture(broken_adapter())
    assert run.cases > 200
    assert run.failures == 0, _problems(run)[:5]


# What agetorture must say about each bug, not merely that something failed.
SYMPTOMS = {
    "trailing-data": "rejects as payload (trailing data)",
    "ignore-final-flag": "rejects as payload (no final chunk)",
    "empty-final-chunk": "rejects as payload (empty final chunk)",
    "early-release": "that are not a prefix of the",
    "little-endian-counter": "for a file the implementation wrote",
    "nonce-reuse": "for a file the implementation wrote",
}


@pytest.mark.parametrize("bug", BUGS)
def test_bug_is_caught(bug):
    run = _torture(broken_adapter(bug))
    problems = _problems(run)
    assert run.failures > 0, f"agetorture missed {bug}"
    assert any(SYMPTOMS[bug] in p for p in problems), problems[:5]


def test_wrong_error_kind_is_caught():
    """An implementation that reports a header MAC failure as a header failure
    decrypts nothing wrongly, yet must still fail: the kind is part of the answer."""
    import dataclasses

    from torture.adapter import agefast_adapter

    honest = agefast_adapter()
    mislabels = dataclasses.replace(honest, classify=lambda e: {"mac": "header"}.get(honest.classify(e),
                                                                                     honest.classify(e)))
    run, _, _ = run_torture(mislabels, PROFILES["quick"], 7, {"Micro"}, {"tamper"}, oracles=("reference",))
    problems = _problems(run)
    assert any(p.startswith("expected mac") for p in problems), problems[:5]
