"""A simulated non-Linux platform: what agefast meets on macOS or Windows, as far as one Linux process can show it.

Python imports this module at start-up when its folder is on PYTHONPATH
(tests/test_platform.py puts it first, for the pytest run and every command
that run starts). Under AGEFAST_SIMULATE_PLATFORM=portable it takes away,
before agefast is imported:
- the Linux-only calls: os.memfd_create, preadv, pwritev, copy_file_range,
  sched_getaffinity, O_DIRECT and O_TMPFILE, and the positional pread and
  pwrite that Windows lacks;
- the fcntl module (Windows has none; macOS has one without memfd seals);
- /proc: opening anything under it fails, as where there is none;
- the kernels: numba and llvmlite cannot be imported (and the run gives
  NUMBA_CACHE_DIR an empty folder), as on a machine with no shipped class
  for its CPU and no JIT installed: every job runs on cryptography.
Not taken away: os.register_at_fork, which Windows lacks together with
os.fork (which the harness needs): no system has fork without it, and the
standard library calls it at import wherever fork is there (random, and
asyncio from Python 3.12); tests/test_portable.py runs agefast's one use of
it without it. Nor termios and SIGHUP, which the test harness uses
(tests/test_portable.py runs the commands without termios), and os.uname,
which numpy's import calls on Linux (tests/test_portable.py takes
agefast's way without it).
The test harness's own pty driver still needs fcntl: it finds the module as
HARNESS_FCNTL here.
"""

import builtins
import io
import os
import sys

HARNESS_FCNTL = None

if os.environ.get("AGEFAST_SIMULATE_PLATFORM") == "portable":
    import fcntl as HARNESS_FCNTL  # noqa: N812

    for _name in ("memfd_create", "preadv", "pwritev", "copy_file_range", "sched_getaffinity", "O_DIRECT", "O_TMPFILE",
                  "pread", "pwrite"):
        if hasattr(os, _name):
            delattr(os, _name)
    if hasattr(os, "process_cpu_count"):
        # Python 3.13's, made when os was imported, calls the sched_getaffinity just taken away; where a
        # system has none, it is cpu_count.
        os.process_cpu_count = os.cpu_count
    if "tempfile" in sys.modules:   # imported by a site hook before this ran: it found O_TMPFILE then
        sys.modules["tempfile"]._O_TMPFILE_WORKS = False
    for _module in ("fcntl", "numba", "llvmlite"):
        sys.modules[_module] = None     # an import of it raises ImportError

    def _refuse_proc(real):
        def opener(file, *args, **kwargs):
            if isinstance(file, (str, bytes, os.PathLike)) and os.path.abspath(os.fsdecode(file)).startswith("/proc/"):
                raise FileNotFoundError(2, "No such file or directory (simulated platform: no /proc)", file)
            return real(file, *args, **kwargs)
        return opener

    builtins.open = io.open = _refuse_proc(io.open)
    os.open = _refuse_proc(os.open)
