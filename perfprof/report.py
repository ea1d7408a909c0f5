"""Text rendering of readings: perf-stat style, and the per-test table."""

NS_PER_MS = 1e6


def stat_table(reading, title, elapsed_s):
    """Render one Reading the way `perf stat` does."""
    lines = [f" Performance counter stats for {title}:", ""]
    for name in reading:
        value = reading[name]
        if value is None:
            label = "<not supported>" if reading.reasons[name].startswith("not supported") else "<not counted>"
            lines.append(f"{label:>18}      {name:<24}  # {reading.reasons[name]}")
            continue
        if name == "task-clock":
            shown = f"{value / NS_PER_MS:>18.2f} msec"
        else:
            shown = f"{value:>18,}     "
        notes = []
        if name == "instructions" and reading.ipc is not None:
            notes.append(f"# {reading.ipc:.2f} insn per cycle")
        if name in reading.user_only:
            notes.append("# user space only")
        if name in reading.multiplexed:
            notes.append(f"({reading.multiplexed[name]:.2%})")
        lines.append(f"{shown} {name:<24}  {'  '.join(notes)}".rstrip())
    lines += ["", f"{elapsed_s:>18.9f} seconds time elapsed", ""]
    return "\n".join(lines)


def per_test_table(rows):
    """Render (test id, Reading, bytes or None) rows: task-clock ms, IPC, cycles/byte."""
    header = ("test", "task-clock ms", "IPC", "cycles/byte")
    body = []
    for test_id, reading, nbytes in rows:
        clock = reading.get("task-clock")
        cycles = reading.get("cycles")
        body.append(
            (
                test_id,
                "n/a" if clock is None else f"{clock / NS_PER_MS:.2f}",
                "n/a" if reading.ipc is None else f"{reading.ipc:.2f}",
                "n/a" if cycles is None or not nbytes else f"{cycles / nbytes:.2f}",
            )
        )
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(row):
        first = row[0].ljust(widths[0])
        return "  ".join([first, *(cell.rjust(width) for cell, width in zip(row[1:], widths[1:]))])

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, body)])
