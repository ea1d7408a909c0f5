"""Wider pipes for the command's input and output.

A pipe holds 64 KiB by default, so the command and the program at the other
end (`cat` feeding it, `cat > out` or `sha256sum` reading it) take turns 64
KiB at a time, each waking the other. With 1 MiB (Linux's limit for
unprivileged processes, /proc/sys/fs/pipe-max-size), on 256 MiB: encrypting
from `cat file |` took 0.336 s against 0.437 s (Go age 0.535 s); writing
into `| cat > out`, encrypting 0.270 s against 0.377 s (Go age 0.440 s),
decrypting 0.253 s against 0.329 s (Go age 0.296 s) (benchmarks/HISTORY.md,
"The file pipeline on every core").
"""

import os
import stat

from .portable import fcntl

PIPE_SIZE = 1 << 20


def widen(fd: int) -> None:
    """Give the pipe at `fd` a PIPE_SIZE buffer; best effort: anything that is
    not a pipe, or a system that refuses, is left as it is."""
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
        set_size = getattr(fcntl, "F_SETPIPE_SZ", None)     # Linux only
        if fcntl is not None and set_size is not None:
            fcntl.fcntl(fd, set_size, PIPE_SIZE)
    except OSError:     # EPERM above the limit, EBADF, ...
        pass
