"""python -m perfprof -- COMMAND: counters on a forked child, perf-stat table."""

import subprocess
import sys


def perfprof(*args):
    return subprocess.run([sys.executable, "-m", "perfprof", *args], capture_output=True, text=True, timeout=60)


def row(table, name):
    """The table line for event name, split at its '#' comment."""
    line = next(line for line in table.splitlines() if name in line.split("#")[0].split())
    value, _, comment = line.partition("#")
    return value.split()[0].replace(",", ""), comment.strip()


def test_counts_the_child_and_marks_what_is_not_supported():
    done = perfprof("-e", "task-clock,page-faults,cycles", "--", sys.executable, "-c", "bytearray(16 << 20)[::4096]")
    assert done.returncode == 0, done.stderr
    assert float(row(done.stderr, "task-clock")[0]) > 1.0
    assert int(row(done.stderr, "page-faults")[0]) > 0
    cycles, why = row(done.stderr, "cycles")
    assert (cycles == "<not" and why) or int(cycles) > 0
    assert "seconds time elapsed" in done.stderr


def test_children_of_the_command_are_counted():
    child = f"{sys.executable} -c 'import time; t=time.process_time(); exec(\"while time.process_time()-t<0.2: pass\")'"
    done = perfprof("-e", "task-clock", "--", "sh", "-c", child)
    assert float(row(done.stderr, "task-clock")[0]) > 150


def test_exit_status_is_the_commands():
    assert perfprof("-e", "task-clock", "--", "sh", "-c", "exit 3").returncode == 3
    assert perfprof("-e", "task-clock", "--", "sh", "-c", "kill -TERM $$").returncode == 128 + 15


def test_a_command_that_cannot_run():
    done = perfprof("-e", "task-clock", "--", "/nonexistent/perfprof-test")
    assert done.returncode == 127
    # No table: its reasons were for counters that never counted anything (a thread-sampling one among them).
    assert done.stderr.startswith("perfprof: cannot run") and "<not counted>" not in done.stderr
    assert perfprof("-e", "task-clock", "--", "sh", "-c", "exit 127").stderr.count("task-clock") == 1


def test_usage_errors():
    assert perfprof("-e", "task-clock").returncode == 2
    bad = perfprof("-e", "nope", "--", "true")
    assert bad.returncode == 2 and "unknown event 'nope'" in bad.stderr


def test_a_system_error_of_its_own_is_one_line_and_status_2(run_with_free_fds):
    # One descriptor left: the pipe to the paused child needs two.
    done = run_with_free_fds(
        "import sys\nfrom perfprof.__main__ import main", 'sys.exit(main(["-e", "task-clock", "--", "true"]))', 1
    )
    assert done.returncode == 2
    assert done.stderr.startswith("perfprof: ") and "Too many open files" in done.stderr
    assert "Traceback" not in done.stderr
