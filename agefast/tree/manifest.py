"""What a tree job has done: one JSON line per file, at the root of the tree it writes.

A line is written for a file once its output is whole and before the output
takes its name (agefast.tree.files), with the output's size and modification
time, which the rename keeps. So a job killed at any moment leaves, for each
file, either a line whose output is there with exactly that size and time
(done: a rerun skips it) or no such output (a rerun does it). The rerun
skips a file only if the source is also unchanged (its size and time as the
line says). Paths are the files' bytes decoded as the file system does
(surrogate escapes for bytes that are not UTF-8), which JSON carries as
escapes.

Lines are appended with one write() each to a descriptor opened O_APPEND, so
the workers of one job can share the file.
"""

import json
import os
from collections.abc import Iterable
from typing import Any

from .walk import Found


def load(path: bytes) -> dict[bytes, dict[str, Any]]:
    """The last line for each source path in the manifest at `path`; empty if there is none.

    A line cut short by a kill (the last one) or not of this format is
    ignored: its file is done again.
    """
    done: dict[bytes, dict[str, Any]] = {}
    try:
        with open(path, "rb") as f:
            for line in f:
                try:
                    record = json.loads(line)
                    source = os.fsencode(record["source"])
                except (ValueError, KeyError, TypeError):
                    continue
                done[source] = record
    except FileNotFoundError:
        pass
    return done


def _matches(path: bytes, size: Any, mtime_ns: Any) -> bool:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return bool(st.st_size == size and st.st_mtime_ns == mtime_ns)


def is_done(record: dict[str, Any] | None, found: Found, output: bytes, in_place: bool) -> bool:
    """Whether `record` says the file `found` was done into `output`, and both are as it says.

    In place (re-keying a tree where it is), the output is the source
    itself, as the job left it.
    """
    if record is None or record.get("status") != "done":
        return False
    if not in_place and (record.get("size"), record.get("mtime_ns")) != (found.size, found.mtime_ns):
        return False
    return _matches(output, record.get("output_size"), record.get("output_mtime_ns"))


def line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


class Appender:
    """The manifest opened for appending, one whole line per write."""

    def __init__(self, path: bytes) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            os.write(self._fd, line(record))

    def close(self) -> None:
        os.close(self._fd)
