"""What agefast may do with a file object its caller handed it.

agefast writes from buffers it fills again, and moves a large payload on
threads of its own (agefast.payload.pipeline). Python's own files (a file, a
buffered file, BytesIO) are done with what write() gives them when it
returns, and work from any thread. Anything else may keep what it is handed
(a list of parts, a queue to an uploader thread) or belong to one thread
(sqlite's blobs; a writer whose lock the caller holds while it calls): such a
writer gets bytes of its own, as pyrage gives it, and such files are read and
written on the calling thread alone, as pyrage does.
"""

import io
from typing import Any

_PYTHON_FILES = frozenset({io.FileIO, io.BufferedReader, io.BufferedWriter, io.BufferedRandom, io.BytesIO})


def keeps_nothing(dst: Any) -> bool:
    """Whether `dst` is done with the data its write() is given when it returns: Python's files, and agefast's own
    writers that say so (KEEPS_NOTHING)."""
    return type(dst) in _PYTHON_FILES or getattr(type(dst), "KEEPS_NOTHING", False)


def any_thread(f: Any) -> bool:
    """Whether the file `f` (or the caller's file under agefast's own wrapper `f`, its `wrapped`) may be read or
    written from agefast's threads: Python's files only."""
    while isinstance(wrapped := getattr(type(f), "wrapped", None), property):
        f = wrapped.__get__(f)
    return type(f) in _PYTHON_FILES
