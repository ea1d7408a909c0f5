"""Text rendering of readings: perf-stat style, and the per-test table."""

NS_PER_MS = 1e6

# A longer test id is cut in the middle, so that one long parametrize id does
# not widen every row of the per-test table.
TEST_ID_WIDTH = 80


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


def _cut(test_id):
    if len(test_id) <= TEST_ID_WIDTH:
        return test_id
    head = (TEST_ID_WIDTH - 1) // 2
    return test_id[:head] + "…" + test_id[len(test_id) - (TEST_ID_WIDTH - 1 - head):]


def per_test_table(rows):
    """Render (test id, outcome, Reading, bytes or None) rows: task-clock ms, IPC, cycles/byte."""
    header = ("test", "outcome", "task-clock ms", "IPC", "cycles/byte")
    texts = 2  # the test id and outcome columns are text, aligned left
    body = []
    for test_id, outcome, reading, nbytes in rows:
        clock = reading.get("task-clock")
        cycles = reading.get("cycles")
        body.append(
            (
                _cut(test_id),
                outcome,
                "n/a" if clock is None else f"{clock / NS_PER_MS:.2f}",
                "n/a" if reading.ipc is None else f"{reading.ipc:.2f}",
                "n/a" if cycles is None or not nbytes else f"{cycles / nbytes:.2f}",
            )
        )
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(row):
        cells = zip(row, widths)
        return "  ".join(cell.ljust(width) if i < texts else cell.rjust(width) for i, (cell, width) in enumerate(cells))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, body)])
