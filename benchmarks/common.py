"""What every agefast benchmark shares: test files, keys, the interleaved
timing loop, perfprof readings, the machine description and the results file.

Benchmarks here are measurements, not tests: every case does the same work
(same input, same verified output), cases run alternately in one process so
CPU frequency drift hits them all alike, and results are medians and ratios.
"""

import argparse
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import perfprof

RESULTS = Path(__file__).parent / "results"
MiB = 1 << 20
GiB = 1 << 30
# Software counters work on this VM; the hardware ones are asked for anyway so
# the results say why they are missing instead of showing a 0.
EVENTS = ["task-clock", "page-faults", "context-switches", "cycles", "instructions"]
# The installed console script itself, not a pyenv shim in front of it (the
# shim costs a bash and a pyenv start per call; see bench_latency.py).
AGEFAST = str(Path(sys.executable).with_name("agefast"))
AGE = "/usr/bin/age"
# The load before this benchmark started: others share this 2-core machine.
LOAD_AT_START = os.getloadavg()
KEYGEN = "/usr/bin/age-keygen"


def arguments(doc: str, reps: int, options=(), text_options=()) -> argparse.Namespace:
    """Parse --reps, --dir and a script's own integer `options` and string
    `text_options` ((flag, default, help), ...).

    Makes the working directory, where every benchmark keeps its files.
    """
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    for flag, default, text in options:
        ap.add_argument(flag, type=int, default=default, help=f"{text} (default {default})")
    for flag, default, text in text_options:
        ap.add_argument(flag, default=default, help=text)
    ap.add_argument("--reps", type=int, default=reps, help=f"rounds of every case (default {reps})")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/agefast-bench"), help="working directory")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    return args


def size_name(n: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def make_file(path: Path, size: int) -> str:
    """Write `size` random bytes to `path`; return their sha256."""
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left:
            piece = os.urandom(min(left, 16 * MiB))
            digest.update(piece)
            f.write(piece)
            left -= len(piece)
    return digest.hexdigest()


def sha256_file(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(16 * MiB):
            digest.update(piece)
    return digest.hexdigest()


def warm(*paths) -> None:
    """Read files once so every timed run finds them in the page cache."""
    for path in paths:
        sha256_file(path)


def compile_bytecode(package: Path | None = None) -> None:
    """Byte-compile `package` (default: the agefast package the commands run), as installing it does.

    This VM's environment sets PYTHONDONTWRITEBYTECODE: a checkout has no
    bytecode, and every command timed would compile its modules again
    (agefast-tree's own took ~30 ms of a 0.1 s start)."""
    if package is None:
        import agefast

        package = Path(agefast.__file__).parent
    run([sys.executable, "-m", "compileall", "-q", str(package)])


def make_key(directory: Path) -> tuple[Path, str]:
    """An X25519 identity file written by Go's age-keygen; returns (path, recipient)."""
    path = directory / "key.txt"
    path.unlink(missing_ok=True)
    subprocess.run([KEYGEN, "-o", str(path)], check=True, capture_output=True)
    for line in path.read_text().splitlines():
        if line.startswith("# public key: "):
            return path, line.removeprefix("# public key: ")
    raise RuntimeError(f"no public key in {path}")


def run(argv, env=None) -> None:
    subprocess.run(argv, check=True, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


def engine_env(engine: str | None) -> dict:
    """The environment of a child running agefast with `engine` (None: agefast's own choice)."""
    env = {k: v for k, v in os.environ.items() if k != "AGEFAST_ENGINE"}
    if engine:
        env["AGEFAST_ENGINE"] = engine
    return env


def in_engine(engine: str | None, fn):
    """fn, called with AGEFAST_ENGINE set to `engine` (agefast reads it at a
    process's first job and keeps it: made to read it again, before and after)."""
    from agefast.payload.engine import forced

    def call():
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(engine_env(engine))
        forced.cache_clear()
        try:
            return fn()
        finally:
            os.environ.clear()
            os.environ.update(saved)
            forced.cache_clear()
    return call


def warm_engine() -> None:
    """Compile the Numba kernels (or load them from Numba's on-disk cache) before timing.

    In-process cases then time the steady state; every agefast command still
    pays the import and cache load, as a user's does.
    """
    from agefast import kernels
    kernels.warm_up()


def kernel_call(key: bytes, counter: int, src, dst, final: bool, seal: bool):
    """The compiled batch alone on one chunk of `src` into `dst`: one ctypes call on buffers lent
    once, none of the Python around it (the floor of agefast's one chunk per call). The callable
    raises if the chunk does not seal (all its bytes written) or open (verified). It keeps the
    lends' holds, so neither buffer can be resized while it lives."""
    from agefast.io import lending
    from agefast.kernels import _abi, _loader, _native

    batch = _loader.functions().batch
    (s_at, n, s_hold), (d_at, m, d_hold) = lending.lend(src, writable=False), lending.lend(dst, writable=True)
    mode = _abi.SEAL if seal else _abi.OPEN
    expect = n + _abi.TAG if seal else 1      # bytes written, chunks verified

    def run(holds=(s_hold, d_hold)):
        if batch(_native.batch_call(key, counter, s_at, n, d_at, m, final, mode)) != expect:
            raise RuntimeError("the kernel call failed")
    run()
    return run


def _cpu_seconds() -> float:
    # RUSAGE_SELF covers every thread of this process, also pool threads that
    # existed before a Profiler opened (which inherit=True cannot count).
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def measure(fn) -> tuple[dict, dict]:
    """Time one call of fn; return (run record, {event: reason} for missing counts)."""
    cpu = _cpu_seconds()
    with perfprof.Profiler(EVENTS, inherit=True) as prof:
        start = time.perf_counter()
        fn()
        seconds = time.perf_counter() - start
    reading = prof.read()
    record = {"seconds": seconds, "cpu_seconds": _cpu_seconds() - cpu}
    record.update({name: reading[name] for name in EVENTS if reading[name] is not None})
    return record, {name: reading.reasons[name] for name in EVENTS if reading[name] is None}


def interleave(cases: dict, reps: int, *, prepare=None, verify=None, log=True) -> dict:
    """Run every case `reps` times, round-robin, rotating who goes first.

    `cases` maps a name to a callable doing the timed work. `prepare(name)`
    runs untimed before each call (e.g. removing the last output), and
    `verify(name)` untimed after it, so a case that produced a wrong result
    aborts the benchmark instead of winning it. Returns {name: {"runs": [...],
    "unsupported": {...}}}; runs[i] of every case belong to the same round.
    """
    names = list(cases)
    out = {name: {"runs": [], "unsupported": {}} for name in names}
    for rep in range(reps):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            if prepare:
                prepare(name)
            record, missing = measure(cases[name])
            if verify:
                verify(name)
            out[name]["runs"].append(record)
            out[name]["unsupported"].update(missing)
        if log:
            line = "  ".join(f"{n}={out[n]['runs'][-1]['seconds']:.3f}s" for n in names)
            print(f"round {rep + 1}/{reps}: {line}", file=sys.stderr, flush=True)
    return out


def median_seconds(case: dict) -> float:
    return statistics.median(r["seconds"] for r in case["runs"])


def paired_ratio(fast: dict, slow: dict) -> float:
    """Median over rounds of slow time / fast time: how many times faster `fast` is.

    Pairing runs of the same round cancels drift that hits both alike.
    """
    return statistics.median(s["seconds"] / f["seconds"] for f, s in zip(fast["runs"], slow["runs"]))


def summarize(case: dict, nbytes: int) -> dict:
    """Medians of a case's runs: seconds, GB/s (10^9 bytes), counters per run."""
    runs = case["runs"]
    seconds = median_seconds(case)
    summary = {"median_seconds": seconds, "gb_per_s": nbytes / seconds / 1e9, "runs": len(runs)}
    for key in ("cpu_seconds", "task-clock", "page-faults", "context-switches"):
        values = [r[key] for r in runs if key in r]
        if values:
            summary[key] = statistics.median(values)
    if "task-clock" in summary and nbytes:
        summary["task_clock_ns_per_byte"] = summary["task-clock"] / nbytes
    return summary


def _lscpu() -> dict:
    fields = {}
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def cpu_named() -> str:
    """The CPU as every figure is to name it: "AMD EPYC" is Zen 2 to Zen 5, told apart by family and model."""
    cpu = _lscpu()
    return f"{cpu.get('Model name')}, family {cpu.get('CPU family')} model {cpu.get('Model')}, {os.cpu_count()} CPUs"


def _git(*args) -> str:
    done = subprocess.run(["git", *args], cwd=Path(__file__).parent, capture_output=True, text=True)
    return done.stdout.strip()


def machine() -> dict:
    import cryptography
    import pyrage  # noqa: F401  (its version comes from the installed metadata)
    from importlib.metadata import version

    cpu = _lscpu()
    flags = cpu.get("Flags", "").split()
    # A machine without Go age (a fresh VM, before .ci/run installs it) still records its run.
    age = (subprocess.run([AGE, "--version"], capture_output=True, text=True).stdout.strip()
           if Path(AGE).exists() else None)
    return {
        "cpu": cpu.get("Model name"),
        "cpu_family": cpu.get("CPU family"),
        "cpu_model": cpu.get("Model"),
        "cpus": os.cpu_count(),
        "hypervisor": cpu.get("Hypervisor vendor"),
        # the flags that choose agefast's class (agefast.kernels._shipped), and the class this CPU takes
        "vector_flags": [f for f in flags if f in ("avx2", "avx512f", "avx512vl", "avx512ifma", "avx512vbmi")],
        "kernel_class": _kernel_class(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "cryptography": cryptography.__version__,
        "pyrage": version("pyrage"),
        "go_age": age,
        "agefast_commit": _git("rev-parse", "--short", "HEAD"),
        # Others work in the same checkout: name library files that differ from HEAD.
        "agefast_uncommitted": _git("status", "--porcelain", "--", "../agefast").splitlines(),
        "agefast_engine_env": os.environ.get("AGEFAST_ENGINE"),
        "free_page_reporting_after_ms": _page_reporting_delay(),
        "loadavg_start": LOAD_AT_START,
    }


def _kernel_class() -> str | None:
    """The name of the kernel class this CPU takes (its shipped build, or the cache's compile for it), or None."""
    from agefast.kernels import _shipped

    cpu_class = _shipped.host_class()
    return cpu_class.name if cpu_class else None


def _page_reporting_delay() -> int | None:
    """How long memory the guest freed stays free before the balloon hands it back to the host
    (this VM's kernel: /sys/module/page_reporting); None where the guest does not report."""
    try:
        return int(Path("/sys/module/page_reporting/parameters/min_free_ms").read_text())
    except (OSError, ValueError):
        return None


def filesystem(path: Path) -> str:
    done = subprocess.run(["findmnt", "-no", "FSTYPE", "-T", str(path)], capture_output=True, text=True)
    return done.stdout.strip()


def save(name: str, result: dict) -> Path:
    """Write benchmarks/results/<name>.json with the machine and the command line."""
    result = {"benchmark": name, "command": " ".join([Path(sys.executable).name, *sys.argv]),
              "machine": machine(), **result}
    result["machine"]["loadavg_end"] = os.getloadavg()
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}", file=sys.stderr)
    return path
