"""A wider pipe for the command's input.

A pipe holds 64 KiB by default, so a producer such as `cat` and the command
take turns 64 KiB at a time, each waking the other. With 1 MiB (Linux's
limit for unprivileged processes, /proc/sys/fs/pipe-max-size) encrypting
256 MiB from `cat file |` took 0.336 s against 0.437 s, Go age 0.535 s
(benchmarks/HISTORY.md, "The file pipeline on every core"). Widening the
output pipe measured no faster (its reader sets the pace) and is not done.
"""

import os
import stat

PIPE_SIZE = 1 << 20


def widen(fd: int) -> None:
    """Give the pipe at `fd` a PIPE_SIZE buffer; best effort: anything that is
    not a pipe, or a system that refuses, is left as it is."""
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
        import fcntl    # here, not at start-up: only a piped input needs it

        set_size = getattr(fcntl, "F_SETPIPE_SZ", None)     # Linux only
        if set_size is not None:
            fcntl.fcntl(fd, set_size, PIPE_SIZE)
    except OSError:     # EPERM above the limit, EBADF, ...
        pass
