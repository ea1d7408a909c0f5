"""python -m torture [--quick] [--target T ...] [--target-encrypt T ...] [--strata NAMES] [--axes NAMES]
[--seed N] [--report DIR]

Targets: agefast (the default), pyrage, module:NAME (a Python module with
pyrage's API), or 'cmd:PROGRAM ARGS…' (a command-line decryptor; {identity}
in ARGS is an identity file, ciphertext on stdin, plaintext on stdout, exit 0
means success). --target-encrypt 'cmd:PROGRAM ARGS… {recipient}' (or a
module) encrypts for the reference to decrypt. Exit status: 0 when every
target agrees with the reference, 1 when any disagrees, 2 on usage errors.
"""

import argparse
import os
import signal
import sys
import time

from . import degraded, encrypting, html, report, reproducers, streams, tamper, targets
from .adapter import agefast_adapter
from .runner import REFERENCE, Profile, Run
from .strata import all_strata

PROFILES = {
    "quick": Profile("quick", flips_per_region=3, fragment_seeds=1, repeats=1, every_chunk=False,
                     key_pairs="paired", multistream_streams=8),
    "full": Profile("full", flips_per_region=24, fragment_seeds=8, repeats=4, every_chunk=True,
                    key_pairs="cross", multistream_streams=16),
}
AXES = {"roundtrip+adversarial-io": streams.run_axis, "keys": degraded.run_axis, "tamper": tamper.run_axis,
        "encrypt": encrypting.run_axis}


def run_torture(adapter, profile: Profile, seed: int, strata_names=None, axes=None, oracles=None, log=None,
                decrypting=(), encrypting=()):
    """Run the suite against `adapter` (or None) and the targets; returns (run, strata, seconds)."""
    strata = [s for s in all_strata(profile.multistream_streams) if not strata_names or s.name in strata_names]
    run = Run(adapter, profile, seed, **({"use_oracles": oracles} if oracles is not None else {}),
              decrypting=decrypting, encrypting=encrypting)
    start = time.perf_counter()
    try:
        for stratum in strata:
            for name, axis in AXES.items():
                if (axes is None or name in axes) and (stratum.axes is None or name in stratum.axes):
                    axis(run, stratum)
            run.flush()
            if log:
                log(f"{stratum.name}: {run.cases} cases, {run.failures} failures, {time.perf_counter() - start:.1f}s")
    finally:
        run.close()
    return run, strata, time.perf_counter() - start


def _names(p, value, known, what):
    if value is None:
        return None
    names = set(value.split(","))
    if not names <= set(known):
        p.error(f"unknown {what} {sorted(names - set(known))}; known: {sorted(known)}")
    return names


def _targets(p, specs, encrypt_specs):
    """(adapter or None, decrypting targets, encrypting targets), probed."""
    if len(set(specs)) != len(specs) or len(set(encrypt_specs)) != len(encrypt_specs):
        p.error("a target is given twice")
    adapter = agefast_adapter() if "agefast" in specs else None
    decrypting, encrypting_ = [], []
    try:
        for spec in specs:
            if spec != "agefast":
                decrypting.append(targets.parse(spec))
                decrypting[-1].probe()
        for spec in encrypt_specs:
            t = targets.parse("module:agefast" if spec == "agefast" else spec, encrypting=True)
            if not t.encrypts:
                raise targets.UsageError(f"target {spec!r} cannot encrypt (no encrypt and x25519.Recipient)")
            encrypting_.append(t)
    except BaseException as e:
        # A target not run (or a signal meanwhile) leaves none of the targets' folders of identity files.
        for t in decrypting + encrypting_:
            t.close()
        if isinstance(e, targets.UsageError):
            p.error(str(e))
        raise
    return adapter, decrypting, encrypting_


def _write_report(directory, run, strata, seconds, status) -> None:
    os.makedirs(directory, exist_ok=True)
    paths = reproducers.write(run, directory)
    reports = []
    for party in run.parties.values():
        if party.role != "target" and party.cases == 0:
            continue
        r = report.party_json(run, party, strata, seconds, paths)
        report.write_json(os.path.join(directory, report.slug(party.name) + ".json"), r)
        reports.append(r)
    with open(os.path.join(directory, "index.html"), "w") as f:
        f.write(html.page(reports, seconds, status))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m torture", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="the CI profile (under 2 minutes)")
    p.add_argument("--target", action="append", default=[], help="what to test (repeatable; default agefast)")
    p.add_argument("--target-encrypt", action="append", default=[],
                   help="an encrypting target: 'cmd:PROGRAM ARGS… {recipient}', pyrage or module:NAME")
    p.add_argument("--strata", help="comma-separated stratum names (default: all)")
    p.add_argument("--axes", help=f"comma-separated axes (default: all of {', '.join(AXES)})")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--report", metavar="DIR", help="write JSON per party, index.html and reproducers/ here")
    args = p.parse_args(argv)
    names = _names(p, args.strata, [s.name for s in all_strata(1)], "strata")
    axes = _names(p, args.axes, AXES, "axes")
    specs = args.target or ([] if args.target_encrypt else ["agefast"])
    adapter, decrypting, encrypting_ = _targets(p, specs, args.target_encrypt)
    # agefast alone is cross-checked by Go age and pyrage, as oracles of the
    # reference; named targets are compared with the reference only.
    oracles = None if adapter is not None and not decrypting else (REFERENCE,)
    profile = PROFILES["quick" if args.quick else "full"]
    run, strata, seconds = run_torture(adapter, profile, args.seed, names, axes, oracles,
                                       lambda m: print(m, file=sys.stderr, flush=True), decrypting, encrypting_)
    for party in run.parties.values():
        if party.cases:
            print(f"\n{party.name} ({party.role})")
            print(report.table(report.rows(party), timed=party.target is None and party.role == "target"))
    print(f"\n{run.cases} cases, {run.failures} failures in {seconds:.1f}s ({profile.name} profile, seed {args.seed})")
    print("files judged: " + ", ".join(f"{k} {v}" for k, v in sorted(run.oracle_files.items())))
    for party in run.parties.values():
        if party.not_run:
            print(f"not run by {party.name}: " + "; ".join(f"{r} ({n})" for r, n in sorted(party.not_run.items())))
        for group in party.groups.values():
            d = group[0]
            print(f"DISAGREE {party.name} {d.stratum}/{d.axis} reference {d.reference} vs {d.outcome}: "
                  f"{len(group)} cases, first {d.case}: {d.problem}")
    # A run that judged nothing of a named target (an axis no target takes; the reference's own checks count as
    # cases) must not pass in CI as if all agreed.
    untested = [p.name for p in run.parties.values() if p.role == "target" and not p.cases]
    status = 1 if run.failures else 2 if untested or not run.cases else 0
    if untested or not run.cases:
        print(f"nothing was tested of {', '.join(untested) or 'any target'}: it takes none of these axes and strata",
              file=sys.stderr)
    if args.report:
        _write_report(args.report, run, strata, seconds, status)
        print(f"report: {os.path.join(args.report, 'index.html')}")
    return status


def _terminated(signum, frame):
    # SIGTERM (a CI job's timeout) unwinds as an exit does, so the targets' folders of identity files go.
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminated)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("agetorture: interrupted", file=sys.stderr)
        sys.exit(128 + signal.SIGINT)
