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

On a local disk, lines are appended with one write() each to a descriptor
opened O_APPEND, so the workers of one job can share the file. An object
store (S3) cannot append: there the manifest is one object, rewritten whole
by the job's process (Rewriter), and a kill loses the lines written since
its last rewrite (those files are done again).

On a local disk a file's stamp is its modification time (the fields
mtime_ns, output_mtime_ns); on an fsspec store it is its ETag or the
store's modification time (stamp, output_stamp).
"""

import errno
import json
import os
import stat
import time
from collections.abc import Iterable
from typing import Any

from .walk import Found


def load(data: bytes) -> dict[bytes, dict[str, Any]]:
    """The last line that says a file was done, for each source path in the manifest `data`.

    The last such line, not the file's last line: a line the file failed on
    after it was done (a run at the same time, which found it changed, or a
    run with --force whose identities no longer open it) had hidden the line
    that says what is there, and each rerun failed the file again. Not an
    earlier done line either: where a file's time has whole seconds, a
    re-key back to recipients it had in the same second would have matched
    that line and been skipped. A line is only believed where its output is
    still as it says (is_done). A line cut short by a kill (the last one) or
    not of this format is ignored: its file is done again.
    """
    done: dict[bytes, dict[str, Any]] = {}
    for text in data.splitlines():
        parsed = _record(text)
        if parsed is None:
            # A line a full disk cut short in one worker, and another worker's whole line after it on the same
            # line (the other workers could not know to start a line of their own): the last record on it.
            parsed = _record(text[max(text.rfind(_RECORD_START), 1):])
        if parsed is not None and parsed[1].get("status") == "done":
            done[parsed[0]] = parsed[1]
    return done


# How every line() begins: its record's first key.
_RECORD_START = b'{"operation":'


def _record(text: bytes) -> tuple[bytes, dict[str, Any]] | None:
    """(source path, record) of a manifest line, or None where it is not one."""
    try:
        record = json.loads(text)
        return os.fsencode(record["source"]), record
    except (ValueError, KeyError, TypeError, RecursionError):     # the last: JSON nested thousands deep
        return None


def is_done(record: dict[str, Any] | None, found: Found, output: tuple[int, Any] | None, in_place: bool,
            stamp_keys: tuple[str, str], sealed_for: str | None) -> bool:
    """Whether `record` says the file `found` was done into an output now of size and stamp `output`, and both
    the file and the output are as it says; `stamp_keys` name the stamps of the source's store and the output's;
    `sealed_for`, what this run's outputs are sealed for (agefast.tree.files.sealed_for), must be the record's.

    In place (re-keying a tree where it is), the output is the source
    itself, as the job left it.
    """
    if record is None or record.get("status") != "done" or output is None or output[1] is None:
        return False
    if record.get("sealed_for") != sealed_for:
        return False
    if not in_place and (record.get("size"), record.get(stamp_keys[0])) != (found.size, found.stamp):
        return False
    return (record.get("output_size"), record.get("output_" + stamp_keys[1])) == output


def line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def open_local(path: bytes, flags: int, kept: frozenset[tuple[int, int]] = frozenset()) -> int:
    """The local manifest at `path`, opened with `flags`; OSError naming it unless it is a regular file with no
    other name, and not one of `kept` (the job's key files).

    Its name is the one thing of DST a job writes that is not an output: a
    symbolic link or a hard link planted there would have the job's lines
    appended to whatever it leads to (an identity file, say), and a FIFO
    would hold the job up. So it is opened without following a link and
    without blocking, and looked at before anything is written.
    """
    name = os.fsdecode(path)
    try:
        fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as e:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            raise type(e)(e.errno, e.strerror, name) from None
        if stat.S_ISLNK(mode):
            raise OSError(errno.ELOOP, "the manifest is a symbolic link, not followed", name) from None
        if not stat.S_ISREG(mode):      # a FIFO with no reader, a folder
            raise OSError(errno.EINVAL, "the manifest is not a regular file", name) from None
        raise type(e)(e.errno, e.strerror, name) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):     # a FIFO with a reader
            raise OSError(errno.EINVAL, "the manifest is not a regular file", name)
        if st.st_nlink > 1:
            raise OSError(errno.EMLINK, "the manifest has another name (a hard link), not written", name)
        if (st.st_dev, st.st_ino) in kept:
            raise OSError(errno.EPERM, "the manifest is a key file of this job, not written", name)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _last_byte(path: bytes, size: int) -> bytes | None:
    """The manifest's last byte, or None where it cannot be read (one this account may only append to)."""
    try:
        # O_NONBLOCK: a FIFO put there since fails the read rather than hang the open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        return os.pread(fd, 1, size - 1)
    except OSError:
        return None
    finally:
        os.close(fd)


class Appender:
    """The manifest opened for appending (open_local), one whole line per write."""

    def __init__(self, path: bytes, kept: frozenset[tuple[int, int]] = frozenset()) -> None:
        self._name = os.fsdecode(path)
        self._fd = open_local(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, kept)
        try:
            # A line a kill cut short ends where this run's first line would begin, which it would swallow: this
            # one begins on a line of its own (as the Rewriter's).
            size = os.fstat(self._fd).st_size
            self._cut = bool(size) and _last_byte(path, size) not in (b"\n", None)
        except BaseException:
            os.close(self._fd)
            raise

    def _write(self, data: bytes) -> None:
        if self._cut:
            data = b"\n" + data
        try:
            written = os.write(self._fd, data)
        except OSError as e:
            raise type(e)(e.errno, e.strerror, self._name) from None
        # A full disk cuts a line short by the count written, not by an error: the file the line was for is not
        # done, and the next line begins on a line of its own.
        self._cut = written != len(data)
        if self._cut:
            raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (a line cut short)", self._name)

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            self._write(line(record))

    def close(self) -> None:
        os.close(self._fd)


class Rewriter:
    """The manifest as one object of an fsspec store, rewritten whole: what it held, then the lines given since.

    Rewritten when closed, and meanwhile once the last rewrite is REWRITE_AFTER
    seconds old and WAIT_PER_UPLOAD times as old as it took (so that a large
    manifest costs at most a tenth of the job's time in uploads). A kill loses
    the lines since the last rewrite: about REWRITE_AFTER seconds of work.
    """

    REWRITE_AFTER = 10.0
    WAIT_PER_UPLOAD = 10.0

    def __init__(self, fs: Any, key: str, previous: bytes) -> None:
        self._fs, self._key = fs, key
        self._lines = [previous] if previous.endswith(b"\n") or not previous else [previous, b"\n"]
        self._last, self._took = time.monotonic(), 0.0

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        self._lines += [line(r) for r in records]
        if time.monotonic() - self._last >= max(self.REWRITE_AFTER, self.WAIT_PER_UPLOAD * self._took):
            self._rewrite()

    def _rewrite(self) -> None:
        started = time.monotonic()
        self._fs.pipe_file(self._key, b"".join(self._lines))
        self._last = time.monotonic()
        self._took = self._last - started

    def close(self) -> None:
        self._rewrite()
