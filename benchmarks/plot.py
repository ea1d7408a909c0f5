"""Turn benchmarks/results/*.json into docs/img/*.png and the per-benchmark tables of benchmarks/HISTORY.md.

Each table lives between `<!-- table:NAME -->` and `<!-- /table:NAME -->` in
benchmarks/HISTORY.md and is replaced whole; the prose around it is written
by hand. A result file that is missing leaves its table as it was. The
user's page, docs/performance.md, holds one table per machine, written by
hand from these.

    python benchmarks/plot.py
"""

import json
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the file-only backend)

from common import RESULTS, size_name  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "benchmarks" / "HISTORY.md"
IMG = ROOT / "docs" / "img"
MiB = 1 << 20

LABELS = {
    "agefast-t1": "agefast.encrypt/decrypt, threads=1",
    "agefast-t2": "agefast.encrypt/decrypt, threads=2",
    "agefast-crypto": "agefast.encrypt/decrypt, cryptography engine",
    "pyrage": "pyrage.encrypt/decrypt",
    "cryptography": "bare cryptography STREAM loop (ceiling)",
    "agefast-cli": "agefast command",
    "age-cli": "Go age command",
    "age-cli-p1": "Go age command, GOMAXPROCS=1",
}


def load(name: str):
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def optional(summary: dict, key: str, fmt: str) -> str:
    return format(summary[key], fmt) if key in summary else "n/a"


def files_table(result: dict) -> str:
    parts = []
    for op, data in result["ops"].items():
        rows = [[tool, f"{c['median_seconds']:.3f}", f"{c['gb_per_s']:.3f}", f"{c['cpu_seconds']:.3f}",
                 optional(c, "task_clock_ns_per_byte", ".2f"), optional(c, "context-switches", ".0f"),
                 optional(c, "page-faults", ".0f")]
                for tool, c in data["cases"].items()]
        parts.append(f"**{op}**, {size_name(result['size'])}, median of {len(next(iter(data['cases'].values()))['runs'])} "
                     "interleaved runs\n\n" + table(
                         ["case", "median s", "GB/s", "CPU s", "task-clock ns/B", "ctx switches", "page faults"], rows))
        ratios = ", ".join(f"{label}: **{value:.2f}x**" for label, value in data["ratios"].items())
        parts.append(f"Speed ratios (median of per-round time ratios): {ratios}")
    unsupported = next(iter(result["ops"]["encrypt"]["cases"].values()))["unsupported"]
    parts.append("Not counted: " + "; ".join(f"{k}: {v}" for k, v in unsupported.items()))
    return "\n\n".join(parts)


def latency_table(result: dict) -> str:
    parts = []
    for op, data in result["ops"].items():
        rows = [[tool, f"{c['median_seconds'] * 1e3:.1f}", f"{min(r['seconds'] for r in c['runs']) * 1e3:.1f}",
                 f"{c['cpu_seconds'] * 1e3:.1f}", len(c["runs"])] for tool, c in data["cases"].items()]
        parts.append(f"**{op}** of 1 KiB\n\n" + table(["case", "median ms", "min ms", "CPU ms", "runs"], rows))
    probe = result["api_modules_after_1kib_round_trip"]
    parts.append("Modules loaded after a 1 KiB `agefast.encrypt` + `decrypt` round trip: "
                 + ", ".join(f"`{m}`: {loaded}" for m, loaded in probe.items()))
    profile = result["cli_import_profile"]
    heavy = profile["numeric_modules_imported"]
    parts.append(f"`python -X importtime -m agefast` (1 KiB encrypt): all imports {profile['total_s'] * 1e3:.0f} ms; "
                 f"numba/numpy/llvmlite imported: {', '.join(heavy) if heavy else 'none'}. Slowest top-level imports:\n\n"
                 + table(["module", "cumulative ms"],
                         [[r["module"], f"{r['cumulative_s'] * 1e3:.1f}"] for r in profile["top"]]))
    return "\n\n".join(parts)


def rss_table(result: dict) -> str:
    sizes = list(result["sizes"])
    names = list(result["sizes"][sizes[0]])
    rows = [[name] + [f"{result['sizes'][s][name]['median_kib'] / 1024:.1f}" for s in sizes]
            + [f"{result['growth_kib'][name] / 1024:+.1f}"] for name in names]
    return table(["command"] + [f"peak RSS MiB, {size_name(int(s))}" for s in sizes] + ["growth MiB"], rows)


def stream_table(result: dict) -> str:
    parts = []
    for op, data in result["timing"].items():
        rows = [[name, f"{c['median_seconds']:.3f}", f"{c['gb_per_s']:.3f}",
                 f"{data['stream_vs_memory'][name]:.2f}" if name in data["stream_vs_memory"] else "1 (baseline)"]
                for name, c in data["cases"].items()]
        parts.append(f"**{op}**, {size_name(result['size'])} in 1 MiB pieces\n\n"
                     + table(["case", "median s", "GB/s", "speed vs in-memory"], rows))
    peaks = result["tracemalloc_peak_bytes"]
    rows = [[size_name(int(s)), f"{p['encryptor'] / MiB:.2f}", f"{p['decryptor'] / MiB:.2f}"] for s, p in peaks.items()]
    parts.append("tracemalloc peak while streaming through a file\n\n"
                 + table(["stream", "encryptor MiB", "decryptor MiB"], rows))
    return "\n\n".join(parts)


def sizes_table(result: dict) -> str:
    parts = []
    for op in ("encrypt", "decrypt"):
        names = list(result["sizes"][0][op])
        rows = [[size_name(s["size"])] + [f"{s[op][n]['gb_per_s']:.3g}" for n in names] for s in result["sizes"]]
        parts.append(f"**{op}**, GB/s (median)\n\n" + table(["size"] + names, rows))
    return "\n\n".join(parts)


def sizes_plot(result: dict) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    sizes = [s["size"] for s in result["sizes"]]
    for ax, op in zip(axes, ("encrypt", "decrypt")):
        for name in result["sizes"][0][op]:
            ax.plot(sizes, [s[op][name]["gb_per_s"] for s in result["sizes"]], marker="o",
                    linestyle="--" if name.endswith(("-cli", "-p1")) else "-", label=LABELS.get(name, name))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes, [size_name(s) for s in sizes], rotation=45)
        ax.set_title(op)
        ax.set_xlabel("payload size")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("GB/s (10^9 bytes per second, median)")
    axes[1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(IMG / "sizes.png", dpi=110)
    plt.close(fig)


def files_plot(result: dict) -> None:
    """Bars of GB/s per case, one group per op."""
    ops = list(result["ops"])
    tools = list(result["ops"][ops[0]]["cases"])
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / len(tools)
    for i, tool in enumerate(tools):
        bars = ax.bar([g + i * width for g in range(len(ops))],
                      [result["ops"][op]["cases"][tool]["gb_per_s"] for op in ops], width, label=tool)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(ops))], ops)
    ax.set_ylabel("GB/s (10^9 bytes per second), median")
    ax.set_title(f"{size_name(result['size'])} page-cached file to file; "
                 "-crypto: AGEFAST_ENGINE=cryptography, -t1: --threads 1")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(IMG / "files.png", dpi=110)
    plt.close(fig)


def replace(doc: str, name: str, text: str) -> str:
    pattern = re.compile(rf"(<!-- table:{re.escape(name)} -->\n).*?(<!-- /table:{re.escape(name)} -->)", re.S)
    if not pattern.search(doc):
        print(f"benchmarks/HISTORY.md has no place for table {name}", file=sys.stderr)
        return doc
    return pattern.sub(lambda m: m.group(1) + text + "\n" + m.group(2), doc)


def engine_table(result: dict) -> str:
    """The headline: agefast's default engine choice against its cryptography engine and the peers."""
    rows = []
    for op, data in result["ops"].items():
        c, r = data["cases"], data["ratios"]
        rows.append([op, f"{c['agefast-cli']['gb_per_s']:.2f}", f"{c['agefast-cli-crypto']['gb_per_s']:.2f}",
                     f"{c['age-cli']['gb_per_s']:.2f}", f"{r['agefast-cli / age-cli']:.2f}x",
                     f"{c['agefast']['gb_per_s']:.2f}", f"{c['pyrage']['gb_per_s']:.2f}",
                     f"{r['agefast / pyrage']:.2f}x", optional(r, "python-copy / age-cli", ".2f") + "x"])
    m = result["machine"]
    settle = f", {result['settle']} s settle before each run" if result.get("settle") else ""
    return (f"{size_name(result['size'])} page-cached file, agefast {m['agefast_commit']}, "
            f"load average {m['loadavg_start'][0]:.1f} at the start{settle}\n\n"
            + table(["op", "agefast command GB/s", "same, cryptography engine", "Go age GB/s", "agefast/age",
                     "agefast.*_file GB/s", "pyrage.*_file GB/s", "agefast/pyrage",
                     "copy-only Python command/age (the ceiling)"], rows))


def main() -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    doc = DOC.read_text()
    files = load("files")
    if files is not None:
        doc = replace(doc, "engine", engine_table(files))
        doc = replace(doc, "files", files_table(files))
        files_plot(files)
    sizes = load("sizes")
    if sizes is not None:
        doc = replace(doc, "sizes", sizes_table(sizes))
        sizes_plot(sizes)
    for name, render in (("latency", latency_table), ("rss", rss_table), ("stream", stream_table)):
        result = load(name)
        if result is not None:
            doc = replace(doc, name, render(result))
    DOC.write_text(doc)


if __name__ == "__main__":
    main()
