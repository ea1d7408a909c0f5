"""python -m torture [--quick] [--strata NAMES] [--seed N] [--report FILE.json]"""

import argparse
import sys
import time

from . import degraded, report, streams, tamper
from .adapter import agefast_adapter
from .runner import Profile, Run
from .strata import all_strata

PROFILES = {
    "quick": Profile("quick", flips_per_region=3, fragment_seeds=1, repeats=1, every_chunk=False,
                     key_pairs="paired", multistream_streams=8),
    "full": Profile("full", flips_per_region=24, fragment_seeds=8, repeats=4, every_chunk=True,
                    key_pairs="cross", multistream_streams=16),
}
AXES = {"roundtrip+adversarial-io": streams.run_axis, "keys": degraded.run_axis, "tamper": tamper.run_axis}


def run_torture(adapter, profile: Profile, seed: int, strata_names=None, axes=None, oracles=None, log=None):
    """Run the suite against `adapter`; returns (run, strata, seconds)."""
    strata = [s for s in all_strata(profile.multistream_streams) if not strata_names or s.name in strata_names]
    run = Run(adapter, profile, seed, **({"use_oracles": oracles} if oracles is not None else {}))
    start = time.perf_counter()
    try:
        for stratum in strata:
            for name, axis in AXES.items():
                if axes is None or name in axes:
                    axis(run, stratum)
            run.flush()
            if log:
                log(f"{stratum.name}: {run.cases} cases, {run.failures} failures, {time.perf_counter() - start:.1f}s")
    finally:
        run.close()
    return run, strata, time.perf_counter() - start


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m torture", description=__doc__)
    p.add_argument("--quick", action="store_true", help="the CI profile (under 2 minutes)")
    p.add_argument("--strata", help="comma-separated stratum names (default: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--report", help="write a JSON report here")
    args = p.parse_args(argv)
    names = set(args.strata.split(",")) if args.strata else None
    known = {s.name for s in all_strata(1)}
    if names and not names <= known:
        p.error(f"unknown strata {sorted(names - known)}; known: {sorted(known)}")
    profile = PROFILES["quick" if args.quick else "full"]
    run, strata, seconds = run_torture(agefast_adapter(), profile, args.seed, names,
                                       log=lambda m: print(m, file=sys.stderr, flush=True))
    rows = report.rows(run)
    print(report.table(rows))
    print(f"\n{run.cases} cases, {run.failures} failures in {seconds:.1f}s ({profile.name} profile, seed {args.seed})")
    print("files judged by each oracle: " + ", ".join(f"{k} {v}" for k, v in sorted(run.oracle_files.items())))
    for r in rows:
        for ex in r["failure_examples"]:
            print(f"FAIL {r['stratum']}/{r['axis']}: {ex['case']}: {ex['problem']}")
    if args.report:
        report.write_json(args.report, run, strata, seconds, rows)
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main())
