"""A tree of files: agefast-tree against Go age and agefast-rekey run once per file through xargs -P2.

The tree: --files small files of 1-64 KiB in nested folders (some with
spaces and non-ASCII names), and --large files of --large-mib MiB. The
shell user's way is `find SRC -type f | xargs -P2 -n1` running one command
per file (Go age for encrypt and decrypt, agefast-rekey for rekey), which
pays a process start per file; agefast-tree does the tree in one process.
Cases run in interleaved rounds, each into a fresh output folder; the
ratios are medians of per-round ratios. Checked outside the timing, once:
Go age decrypts every output of agefast-tree encrypt and the round trip is
byte-identical; no two outputs share a payload nonce or an X25519 share;
after a rekey, Go age opens every file with the new identity. The floor,
in the same rounds: `cp -r` of each case's input tree, the file system's own
cost of creating as many files (on a VM whose file creation is slow, it
bounds every tool's ratio). `verify` of
the large files is compared with `agefast -d` of one file of the same total
size to /dev/null.

Every round writes and deletes ~3 GB of outputs. The VM's balloon hands
memory the guest freed back to the host (free page reporting: at once
where the result's free_page_reporting_after_ms is 0), and the next writes
fault it in again from the host, up to 6-11 s of system time for 1 GiB
(benchmarks/HISTORY.md): the whole-tree ratios then measure that, on
agefast's ~1.3 s more than on Go age's ~16 s. So each case first copies
its input, not timed, and every timed run writes into the memory that the
run before it freed; on this VM's kernel, as root, `echo 60000 >
/sys/module/page_reporting/parameters/min_free_ms` keeps freed memory in
the guest for a minute, as on a machine without a balloon.

    python benchmarks/bench_tree.py --reps 5
"""

import os
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from common import AGE, AGEFAST, MiB, arguments, compile_bytecode, make_key, run, save, warm

TREE = str(Path(sys.executable).with_name("agefast-tree"))
REKEY = str(Path(sys.executable).with_name("agefast-rekey"))


def make_tree(root: Path, files: int, large: int, large_mib: int) -> int:
    rng = random.Random(44)
    root.mkdir(parents=True, exist_ok=True)
    total = 0
    for i in range(files):
        folder = root / f"dir {i % 10}" / f"sub-{i % 7}" / ("é" if i % 3 == 0 else "plain")
        folder.mkdir(parents=True, exist_ok=True)
        size = rng.randint(1024, 64 * 1024)
        (folder / f"file {i}.bin").write_bytes(rng.randbytes(size))
        total += size
    block = os.urandom(MiB)
    for i in range(large):
        with open(root / f"large-{i}.bin", "wb") as f:
            for _ in range(large_mib):
                f.write(block)
        total += large_mib * MiB
    return total


def shell_per_file(src: Path, dst: Path, command: str) -> list[str]:
    """find | xargs -P2 -n1 running `command` (with $2 the file's path under SRC, $1 DST) once per file."""
    script = f'mkdir -p "$1/$(dirname "$2")" && {command}'
    return ["sh", "-c", f'cd "$0" && find . -type f -print0 | xargs -0 -P2 -n1 sh -c \'{script}\' _ "$1"', str(src),
            str(dst)]


def timed(argv: list[str]) -> float:
    import time
    start = time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed: {done.stderr[-2000:]!r}")
    return seconds


def fresh(*paths: Path) -> None:
    for p in paths:
        shutil.rmtree(p, ignore_errors=True)
    subprocess.run(["sync"])


def check_outputs(src: Path, enc: Path, key: Path) -> None:
    """Go age opens every output to the source's bytes; payload nonces and shares are all distinct."""
    seen: set[bytes] = set()
    count = 0
    for path in src.rglob("*"):
        if not path.is_file():
            continue
        sealed = enc / (str(path.relative_to(src)) + ".age")
        opened = subprocess.run([AGE, "-d", "-i", str(key), str(sealed)], capture_output=True, check=True).stdout
        if opened != path.read_bytes():
            raise RuntimeError(f"{sealed} does not decrypt to {path}")
        data = sealed.read_bytes()
        header, _, rest = data.partition(b"\n--- ")
        items = [line.split()[2] for line in header.split(b"\n") if line.startswith(b"-> X25519 ")]
        items.append(rest.split(b"\n", 1)[1][:16])
        seen.update(items)
        count += len(items)
    if len(seen) != count:
        raise RuntimeError("two outputs share a payload nonce or an X25519 share")


def main() -> None:
    args = arguments(__doc__, 5, options=(("--files", 5000, "small files"), ("--large", 4, "large files"),
                                          ("--large-mib", 256, "size of each large file in MiB")))
    compile_bytecode()
    work = args.dir / "tree"
    fresh(work)
    key, recipient = make_key(args.dir)
    new_key = args.dir / "new-key.txt"
    new_key.unlink(missing_ok=True)
    subprocess.run([str(Path(AGE).with_name("age-keygen")), "-o", str(new_key)], check=True, capture_output=True)
    new_recipient = subprocess.run([str(Path(AGE).with_name("age-keygen")), "-y", str(new_key)], check=True,
                                   capture_output=True, text=True).stdout.strip()
    trees = {"all": work / "all", "small": work / "small", "large": work / "large"}
    sizes = {"all": make_tree(trees["all"], args.files, args.large, args.large_mib),
             "small": make_tree(trees["small"], args.files, 0, 0),
             "large": make_tree(trees["large"], 0, args.large, args.large_mib)}
    one = work / "one.bin"
    with open(one, "wb") as f:
        for large in sorted(trees["large"].iterdir()):
            f.write(large.read_bytes())
    out, back = work / "out", work / "back"
    for name in ("all", "small"):
        fresh(out, back)
        timed([TREE, "encrypt", "-r", recipient, str(trees[name]), str(out)])
        check_outputs(trees[name], out, key)
    encrypted = {}
    for name in ("all", "small", "large"):
        encrypted[name] = work / f"{name}.enc"
        timed([TREE, "encrypt", "-r", recipient, str(trees[name]), str(encrypted[name])])
        os.unlink(encrypted[name] / ".agefast-tree.jsonl")
    timed([AGEFAST, "-r", recipient, "-o", str(work / "one.age"), str(one)])
    warm(*[p for t in trees.values() for p in t.rglob("*") if p.is_file()])

    cases = {}
    for name in ("all", "small"):
        cases[f"encrypt {name}"] = (
            [TREE, "encrypt", "-r", recipient, str(trees[name]), str(out)],
            shell_per_file(trees[name], out, f'{AGE} -r {recipient} -o "$1/$2.age" "$2"'))
        cases[f"decrypt {name}"] = (
            [TREE, "decrypt", "-i", str(key), str(encrypted[name]), str(back)],
            shell_per_file(encrypted[name], back, f'{AGE} -d -i {key} -o "$1/${{2%.age}}" "$2"'))
    rekeyed = work / "rekeyed"
    results: dict[str, list[float]] = {}
    for rep in range(args.reps):
        for name, (ours, theirs) in cases.items():
            tree_in = trees[name.split()[1]] if name.startswith("encrypt") else encrypted[name.split()[1]]
            copy = ["cp", "-r", str(tree_in), str(out)]
            # Not timed: a copy of the input first, so that each timed run writes into the memory
            # the run before it freed (see the docstring: free page reporting).
            fresh(out, back)
            run(copy)
            fresh(out, back)
            t_ours = timed(ours)
            fresh(out, back)
            t_theirs = timed(theirs)
            results.setdefault(name, []).append(t_theirs / t_ours)
            results.setdefault(name + " seconds", []).append(t_ours)
            results.setdefault(name + " per-file seconds", []).append(t_theirs)
            # the floor: the same files made by cp (the file system's cost of creating them)
            fresh(out, back)
            results.setdefault(name + " cp floor seconds", []).append(timed(copy))
        # rekey in place: agefast-tree against agefast-rekey per file, on copies of the encrypted tree
        fresh(rekeyed)
        shutil.copytree(encrypted["all"], rekeyed)
        t_ours = timed([TREE, "rekey", "-i", str(key), "-r", new_recipient, str(rekeyed)])
        fresh(rekeyed)
        shutil.copytree(encrypted["all"], rekeyed)
        t_theirs = timed(["sh", "-c", f'cd "$0" && find . -type f -print0 | xargs -0 -P2 -n1 sh -c \''
                          f'{REKEY} -i {key} -r {new_recipient} -o "$1" "$1"\' _', str(rekeyed)])
        results.setdefault("rekey all", []).append(t_theirs / t_ours)
        # verify the large files against agefast -d of one file of their total size
        t_ours = timed([TREE, "verify", "-i", str(key), str(encrypted["large"])])
        t_one = timed(["sh", "-c", f'{AGEFAST} -d -i {key} "$0" > /dev/null', str(work / "one.age")])
        results.setdefault("verify large vs agefast -d", []).append(t_one / t_ours)
        print(f"round {rep + 1}: " + "  ".join(f"{k}={v[-1]:.2f}" for k, v in results.items()
                                                if not k.endswith("seconds")), file=sys.stderr, flush=True)
    fresh(rekeyed)
    shutil.copytree(encrypted["all"], rekeyed)
    timed([TREE, "rekey", "-i", str(key), "-r", new_recipient, str(rekeyed)])
    for path in rekeyed.rglob("*.age"):
        subprocess.run([AGE, "-d", "-i", str(new_key), "-o", "/dev/null", str(path)], check=True, capture_output=True)
    summary = {name: statistics.median(values) for name, values in results.items()}
    for name, value in summary.items():
        print(f"{name}: {value:.3f}" + ("" if name.endswith("seconds") else "x"))
    save("tree", {"files": args.files, "large": args.large, "large_mib": args.large_mib, "bytes": sizes,
                  "medians": summary, "rounds": results})


if __name__ == "__main__":
    main()
