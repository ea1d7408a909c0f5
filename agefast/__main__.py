"""`python -m agefast` and the console scripts: agefast (run), agefast-keygen, agefast-inspect, agefast-rekey and
agefast-tree.

Each script imports its command only once SIGINT is at its default action: a Ctrl-C while Python imports it
(some 25 ms) ends the process at once, as it ends age, where KeyboardInterrupt's traceback had been printed.
There is nothing to clean up yet; the command's own handling takes over once it is imported.
"""

import importlib
import os
import signal
import sys
from typing import Callable


def _command(module: str) -> Callable[[], int]:
    """The `main` of the command in `module`, imported with SIGINT at its default action."""
    # Only Python's own handler: a SIGINT the process was started ignoring (a shell script's background job)
    # stays ignored, as age leaves it.
    previous = None
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:
            previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
        except ValueError:      # not the main thread, where no handler is set (nor needed)
            pass
    try:
        main: Callable[[], int] = importlib.import_module(module).main
        return main
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def run() -> None:
    """Run the agefast command, then end the process at once.

    The command has closed its files and joined its threads by the time main
    returns, so the interpreter's teardown (freeing every module and object
    one by one) only adds time: ~20 ms of each command on the project's VM.
    """
    code = _command("agefast.cli.age")()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        code = code or 1  # a closed stdout: the output is incomplete
    os._exit(code)


def keygen() -> int:
    return _command("agefast.cli.keygen")()


def inspect() -> int:
    return _command("agefast.cli.inspect")()


def rekey() -> int:
    return _command("agefast.cli.rekey")()


def tree() -> int:
    return _command("agefast.cli.tree")()


if __name__ == "__main__":
    # As a module the command returns like any program run by runpy would.
    sys.exit(_command("agefast.cli.age")())
