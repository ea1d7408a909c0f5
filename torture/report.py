"""The per-party tables and the JSON report, one file per party."""

import datetime
import hashlib
import json
import os
import platform
import re
import statistics


def _percentile(values, q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def rows(party) -> list[dict]:
    out = []
    for (stratum, axis), st in party.stats.items():
        out.append({
            "stratum": stratum,
            "axis": axis,
            "cases": st.cases,
            "failures": st.failures,
            "not_run": st.not_run,
            "mb_per_s": st.bytes / st.seconds / 1e6 if st.seconds else 0.0,
            "p50_ms": _percentile(st.latencies, 0.50) * 1e3,
            "p99_ms": _percentile(st.latencies, 0.99) * 1e3,
            # tracemalloc cannot count malloc calls; it measures the peak of
            # Python-visible allocation during one operation, on a sample.
            "alloc_peak_kib_per_op": statistics.fmean(st.alloc_peaks) / 1024 if st.alloc_peaks else None,
            "alloc_samples": len(st.alloc_peaks),
            "failure_examples": st.examples,
        })
    return out


def table(rows_: list[dict], timed: bool) -> str:
    """The adapter's table has speed and allocation columns; a target's has
    what was not run instead (its time is per batch, not per operation)."""
    if timed:
        head = (f"{'stratum':<12} {'axis':<15} {'cases':>7} {'fail':>5} {'MB/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
                f"{'alloc KiB/op':>12}")
    else:
        head = f"{'stratum':<12} {'axis':<15} {'cases':>7} {'fail':>5} {'not run':>8}"
    lines = [head, "-" * len(head)]
    for r in rows_:
        line = f"{r['stratum']:<12} {r['axis']:<15} {r['cases']:>7} {r['failures']:>5}"
        if timed:
            alloc = "-" if r["alloc_peak_kib_per_op"] is None else f"{r['alloc_peak_kib_per_op']:.0f}"
            line += f" {r['mb_per_s']:>8.1f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {alloc:>12}"
        else:
            line += f" {r['not_run']:>8}"
        lines.append(line)
    return "\n".join(lines)


def slug(name: str) -> str:
    """A file name for a party, one for each name: `agefast` as it is; `cmd:age -d -i {identity}` ->
    `cmd-age-d-i-identity-` and 8 hex digits of the name's hash, as any name the file name changes or cuts:
    targets whose names differ only in punctuation, spacing or late had shared one report."""
    text = re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-") or "target"
    if text == name and len(text) <= 64:
        return text
    if len(text) > 48:
        tail = text[-48:]
        text = tail[tail.find("-") + 1:]
    return text + "-" + hashlib.sha256(name.encode()).hexdigest()[:8]


def groups(party, reproducers: dict) -> list[dict]:
    """The party's disagreements, near-duplicates grouped, for JSON and HTML."""
    out = []
    for key, ds in party.groups.items():
        first = ds[0]
        out.append({
            "stratum": first.stratum, "axis": first.axis,
            "reference": first.reference, "reference_detail": first.reference_detail,
            "reference_sha256": first.reference_sha256, "reference_bytes": first.verified,
            "target": first.outcome, "message": first.message,
            "target_sha256": first.sha256, "target_bytes": first.released,
            "count": len(ds),
            "reproducer": reproducers.get((party.name, key)),
            "cases": [{"case": d.case, "problem": d.problem} for d in ds],
        })
    return out


def party_json(run, party, strata, seconds: float, reproducers: dict) -> dict:
    return {
        "implementation": party.name,
        "role": party.role,
        "profile": run.profile.name,
        "seed": run.seed,
        "strata": [s.name for s in strata],
        "oracles": list(run.use_oracles),
        "oracle_files": dict(run.oracle_files),
        "files": party.files,
        "cases": party.cases,
        "agreements": party.cases - party.failures,
        "failures": party.failures,
        "not_run": dict(party.not_run),
        "declared": party.target.declared if party.target else [],
        "seconds": round(seconds, 2),
        "finished": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs)",
        "target_seconds": round(party.seconds, 2),
        "axes": rows(party),
        "disagreements": groups(party, reproducers),
    }


def write_json(path, report: dict) -> None:
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
