"""`python -m agefast` and the agefast console script (run) run the agefast command."""

import os
import sys

from agefast.cli.age import main


def run() -> None:
    """Run the command, then end the process at once.

    The command has closed its files and joined its threads by the time main
    returns, so the interpreter's teardown (freeing every module and object
    one by one) only adds time: ~20 ms of each command on the project's VM.
    """
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        code = code or 1  # a closed stdout: the output is incomplete
    os._exit(code)


if __name__ == "__main__":
    # As a module the command returns like any program run by runpy would.
    sys.exit(main())
