"""python -m perfprof [-e EVENTS] [--kernel] -- COMMAND ...: a small `perf stat`."""

import argparse
import os
import shlex
import signal
import sys
import time

from perfprof.errors import PerfprofError
from perfprof.events import DEFAULT_EVENTS
from perfprof.profiler import Profiler
from perfprof.report import stat_table


def _parser():
    parser = argparse.ArgumentParser(prog="python -m perfprof", description="Count perf events for a command.")
    parser.add_argument(
        "-e", "--events", default=",".join(DEFAULT_EVENTS), help="comma-separated perf event names"
    )
    parser.add_argument("--kernel", action="store_true", help="count kernel mode too (exclude_kernel=0)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    return parser


def _spawn_paused(command):
    """Fork a child that execs command once the returned pipe gets a byte; also return a pipe that ends empty
    where the exec happened (its write end closes on exec) and with a byte where it failed."""
    go_read, go_write = os.pipe()
    failed_read, failed_write = os.pipe()   # both close-on-exec, as os.pipe makes them
    pid = os.fork()
    if pid == 0:
        os.close(go_write)
        os.close(failed_read)
        if os.read(go_read, 1) != b"g":
            os._exit(125)
        try:
            os.execvp(command[0], command)
        except OSError as err:
            print(f"perfprof: cannot run {command[0]!r}: {err.strerror}", file=sys.stderr)
            os.write(failed_write, b"x")
            os._exit(127)
    os.close(go_read)
    os.close(failed_write)
    return pid, go_write, failed_read


def run(command, events, exclude_kernel):
    """Run command under counters; return (exit code, Reading or None where the command could not be run,
    seconds elapsed)."""
    pid, go, failed = _spawn_paused(command)
    try:
        # Counters go on the child before it execs; enable_on_exec switches
        # them on at its first instruction, and inherit follows its children.
        profiler = Profiler(events, pid=pid, inherit=True, exclude_kernel=exclude_kernel, enable_on_exec=True)
        profiler.open()
    except BaseException:
        os.close(go)  # the child reads EOF and exits without running command
        os.close(failed)
        os.waitpid(pid, 0)
        raise
    # Like perf stat: Ctrl-C goes to the command, and we still report.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        started = time.perf_counter()
        os.write(go, b"g")
        os.close(go)
        _, status = os.waitpid(pid, 0)
        elapsed = time.perf_counter() - started
    finally:
        signal.signal(signal.SIGINT, previous)
    ran = os.read(failed, 1) == b""
    os.close(failed)
    reading = profiler.read() if ran else None
    profiler.close()
    code = os.waitstatus_to_exitcode(status)
    return (128 - code if code < 0 else code), reading, elapsed


def main(argv=None):
    args = _parser().parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        _parser().error("give a command after --")
    events = [name.strip() for name in args.events.split(",") if name.strip()]
    try:
        code, reading, elapsed = run(command, events, exclude_kernel=not args.kernel)
    except (PerfprofError, OSError) as err:
        # OSError: perfprof's own pipe, fork or wait failed (too many open
        # files, processes); the command's failures are its exit status.
        print(f"perfprof: {err}", file=sys.stderr)
        return 2
    if reading is not None:     # where the command could not be run, the child said why; nothing was counted
        print(stat_table(reading, repr(shlex.join(command)), elapsed), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
