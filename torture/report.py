"""The per-stratum, per-axis table and the JSON report."""

import json
import statistics


def _percentile(values, q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def rows(run) -> list[dict]:
    out = []
    for (stratum, axis), st in run.stats.items():
        out.append({
            "stratum": stratum,
            "axis": axis,
            "cases": st.cases,
            "failures": st.failures,
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


def table(rows_: list[dict]) -> str:
    head = f"{'stratum':<12} {'axis':<15} {'cases':>7} {'fail':>5} {'MB/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'alloc KiB/op':>12}"
    lines = [head, "-" * len(head)]
    for r in rows_:
        alloc = "-" if r["alloc_peak_kib_per_op"] is None else f"{r['alloc_peak_kib_per_op']:.0f}"
        lines.append(f"{r['stratum']:<12} {r['axis']:<15} {r['cases']:>7} {r['failures']:>5} {r['mb_per_s']:>8.1f} "
                     f"{r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {alloc:>12}")
    return "\n".join(lines)


def write_json(path: str, run, strata, seconds: float, rows_: list[dict]) -> None:
    report = {
        "implementation": run.adapter.name,
        "profile": run.profile.name,
        "seed": run.seed,
        "strata": [s.name for s in strata],
        "oracles": list(run.use_oracles),
        "oracle_files": dict(run.oracle_files),
        "cases": run.cases,
        "failures": run.failures,
        "seconds": round(seconds, 2),
        "axes": rows_,
    }
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
