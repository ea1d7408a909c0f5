"""A buffered byte source over any reader, with the peeking the parsers need.

It accepts objects with `readinto` or only `read`, tolerates readers that
return fewer bytes than asked, and reads straight into the caller's buffer
once its own small buffer is drained, so the payload is never copied twice.
"""

import functools
import os
import re
from collections.abc import Callable
from typing import Any, Protocol

from .._typing import Buffer

# A readinto: fills a buffer, returns the count (0 at the end), or None for
# a non-blocking reader with nothing ready.
ReadInto = Callable[[memoryview], "int | None"]


def _invalid(count: object, size: int) -> OSError:
    # As Python's buffered readers check a raw read: a count past the buffer (or a negative one) would hand on
    # bytes that were never read.
    return OSError(f"the source's read returned {count!r} bytes for a buffer of {size}")


def readinto_of(reader: Any) -> ReadInto:
    """A readinto callable for any reader, also one with only read(); a count it cannot have read is an OSError."""
    readinto = getattr(reader, "readinto", None)
    if readinto is not None:
        def checked(b: memoryview) -> int | None:
            n = readinto(b)
            if n is not None and not 0 <= n <= len(b):
                raise _invalid(n, len(b))
            return n  # type: ignore[no-any-return]

        return checked

    def from_read(b: memoryview) -> int | None:
        data = reader.read(len(b))
        if data is None:
            return None
        if len(data) > len(b):
            raise _invalid(len(data), len(b))
        b[:len(data)] = data
        return len(data)

    return from_read


class HeaderSource(Protocol):
    """What the header parser and the armor check read through: a Source,
    or a MemorySource for a file held in memory."""

    consumed: int   # bytes handed out so far

    def peek(self, n: int) -> bytes: ...

    def readline(self, limit: int) -> bytes: ...

    def read_lines_through(self, prefix: bytes, limit: int, max_line: int) -> bytes: ...

    def read(self, n: int) -> bytes: ...


class MemoryReader:
    """A reader over a buffer in memory that, unlike io.BytesIO, never copies it."""

    def __init__(self, data: Buffer) -> None:
        self._data = memoryview(data).cast("B")

    def readinto(self, b: memoryview) -> int:
        n = min(len(b), len(self._data))
        b[:n] = self._data[:n]
        self._data = self._data[n:]
        return n


def file_position(reader: Any) -> tuple[int, int] | None:
    """(where in its file `reader` reads or writes next, the file's size), for
    a file object of a regular file; None for anything else.

    Only hints, for placing reads in memory and choosing the engine
    (agefast.payload.pipeline, agefast.payload.engine.choose): a wrong answer from an odd
    reader costs speed, never correctness.
    """
    try:
        fd = reader.fileno()
        if not reader.seekable():
            return None
        offset = reader.tell()
        size = os.fstat(fd).st_size
    except (AttributeError, OSError, TypeError, ValueError):   # io.UnsupportedOperation is OSError and ValueError
        return None
    return (offset, size) if type(offset) is int else None


class Source:
    def __init__(self, reader: Any) -> None:
        self._buf = bytearray()
        self._eof = False
        self._readinto = readinto_of(reader)
        self.consumed = 0  # bytes handed out so far

    def _raw_read(self, mv: memoryview) -> int:
        n = self._readinto(mv)
        if n is None:
            # A non-blocking reader with nothing to give: there is no way to
            # wait for it here without spinning, so say so plainly.
            raise BlockingIOError("the source has no data available (non-blocking read returned None)")
        return n

    def _fill(self, want: int) -> None:
        """Buffer at least `want` bytes unless the source ends first."""
        short = want - len(self._buf)
        if short <= 0 or self._eof:
            return
        # One buffer for all the reads it takes: a pipe hands out 64 KiB a
        # call, and a new buffer per read would clear megabytes for each.
        chunk = memoryview(bytearray(max(short, 4096)))
        got = 0
        try:
            while got < short:
                n = self._raw_read(chunk[got:])
                if n == 0:
                    self._eof = True
                    break
                got += n
        finally:
            # Also on a BlockingIOError: what was read stays for the retry.
            self._buf += chunk[:got]

    def peek(self, n: int) -> bytes:
        self._fill(n)
        with memoryview(self._buf) as view:
            return bytes(view[:n])

    def skip(self, n: int) -> None:
        """Drop `n` bytes that peek() returned."""
        del self._buf[:n]
        self.consumed += n

    def read(self, n: int) -> bytes:
        """The next `n` bytes, fewer only at the end; for a few (a payload
        nonce), as they pass through the buffer."""
        data = self.peek(n)
        self.skip(len(data))
        return data

    def readline(self, limit: int) -> bytes:
        """A line including its b'\\n'; shorter at EOF; at most `limit` bytes."""
        start = 0
        while True:
            i = self._buf.find(b"\n", start)
            if i >= 0 and i < limit:
                line = bytes(self._buf[:i + 1])
                del self._buf[:i + 1]
                self.consumed += len(line)
                return line
            if len(self._buf) >= limit or self._eof:
                line = bytes(self._buf[:limit])
                del self._buf[:limit]
                self.consumed += len(line)
                return line
            start = len(self._buf)
            self._fill(len(self._buf) + 1)

    def read_lines_through(self, prefix: bytes, limit: int, max_line: int) -> bytes:
        """Whole lines through the first that starts with `prefix`; fewer at
        the end of the source, at most `limit` bytes, and none past a line
        longer than `max_line` (of which max_line + 1 bytes): a stream of
        garbage is not read much further than that.

        Searched in what the buffer holds, one read of the source at a time
        (a read may return what a pipe has, and the header is all there is
        yet), from the last line start already seen: line by line, a 16 MiB
        header of 2.7 million stanzas took 10 s and 750 MB to read."""
        start = 0    # where the lines not yet searched begin
        seen = 0     # data[start:seen] was searched and holds no b"\n"
        while True:
            data = self._buf
            stop = min(limit, len(data))
            end = _lines_through(data, start, stop, prefix, max_line, seen)
            if end >= 0:
                break
            if stop == limit or self._eof:
                end = stop
                break
            start = data.rfind(b"\n", seen, stop) + 1 or start
            seen = stop
            self._fill(len(data) + 1)
        line = bytes(self._buf[:end])
        del self._buf[:end]
        self.consumed += end
        return line

    def readinto(self, b: Buffer) -> int:
        """Fill `b` completely unless the source ends; return the count."""
        n, error = self.fill(b)
        if error is not None:
            raise error
        return n

    def fill(self, b: Buffer) -> tuple[int, Exception | None]:
        """Fill `b` completely unless the source ends or fails: (the count, and
        the error that cut it short or None). What was read before a failure
        is handed out with it, so that a payload's chunks before a flaw in the
        armor around them are opened, as age opens them. A non-blocking
        source with nothing ready raises BlockingIOError, and what was read
        stays for the retry."""
        mv = memoryview(b).cast("B")
        n = min(len(self._buf), len(mv))
        if n:
            mv[:n] = self._buf[:n]
            del self._buf[:n]
        error = None
        while n < len(mv) and not self._eof:
            try:
                got = self._raw_read(mv[n:])
            except BlockingIOError:
                self._buf[:0] = mv[:n]
                raise
            except Exception as e:
                error = e
                break
            if got == 0:
                self._eof = True
            n += got
        self.consumed += n
        return n, error


# What a MemorySource copies of the buffer at first: more than a
# one-recipient header and the armor check's peek
# (agefast.format.grammar.MAX_WHITESPACE).
_HEAD = 4096


class MemorySource:
    """A Source's reads over a buffer in memory, for the header in front of
    a payload the caller then takes from the buffer itself (`consumed` says
    where it starts).

    Lines are found in a bytes copy of the buffer's start, which grows (by
    doubling) only for a longer header; nothing after the header is copied.
    Through Source and a MemoryReader a 1 KiB file's decryption took 113 us
    instead of 106 (2026-12-03, Zen 2, medians of 9 x 3000): a Source copies
    every line twice and moves its buffer's start.
    """

    def __init__(self, data: Buffer) -> None:
        self._view = memoryview(data).cast("B")
        self._head = bytes(self._view[:_HEAD])
        self.consumed = 0

    def _cover(self, end: int) -> bool:
        """Copy at least the buffer's first `end` bytes into _head; False if
        it already holds all of them, or the whole buffer."""
        have = len(self._head)
        if have >= min(end, len(self._view)):
            return False
        self._head = bytes(self._view[:max(end, 2 * have)])
        return True

    def peek(self, n: int) -> bytes:
        self._cover(self.consumed + n)
        return self._head[self.consumed:self.consumed + n]

    def readline(self, limit: int) -> bytes:
        """A line including its b'\\n'; shorter at the end; at most `limit` bytes."""
        start = self.consumed
        while True:
            i = self._head.find(b"\n", start, start + limit)
            if i >= 0 or not self._cover(start + limit):
                break
        end = i + 1 if i >= 0 else min(start + limit, len(self._head))
        self.consumed = end
        return self._head[start:end]

    def read_lines_through(self, prefix: bytes, limit: int, max_line: int) -> bytes:
        """Whole lines through the first that starts with `prefix`; fewer at
        the end of the buffer, at most `limit` bytes, and none past a line
        longer than `max_line` (of which max_line + 1 bytes), as a Source reads them."""
        start = self.consumed
        stop = start + limit
        while True:
            head = self._head
            covered = min(stop, len(head))
            end = _lines_through(head, start, covered, prefix, max_line)
            # The buffer is copied no further than needed, doubling.
            if end >= 0 or not self._cover(min(stop, 2 * len(head))):
                break
        if end < 0:
            end = covered
        self.consumed = end
        return head[start:end]

    def read(self, n: int) -> bytes:
        """The next `n` bytes; fewer only at the end of the buffer."""
        data = self.peek(n)
        self.consumed += len(data)
        return data


@functools.cache
def _long_line(max_line: int) -> "re.Pattern[bytes]":
    return re.compile(b"[^\n]{%d}" % (max_line + 1))


def _lines_through(data: bytes | bytearray, start: int, stop: int, prefix: bytes, max_line: int,
                   seen: int = 0) -> int:
    """Where data[start:stop], from a line's start, is read through: after
    the first line that starts with `prefix`, or max_line + 1 bytes into the
    first line longer than `max_line`, whichever comes first; -1 if neither
    is in sight. The search for a long line runs in C (a regular expression):
    a loop over the lines was most of reading a header of millions of them.

    data[start:seen] is known to hold no b"\n" (a search before this one,
    with less data): only what follows it is searched, so a long line that
    arrives a few bytes at a time is not searched again at each read (a 60 KB
    one read a byte at a time took 0.77 s)."""
    seen = max(seen, start)
    if data.startswith(prefix, start, stop):
        line = start
    else:
        line = data.find(b"\n" + prefix, seen, stop)
        line = line + 1 if line >= 0 else -1
    end = data.find(b"\n", max(line, seen), stop) + 1 if line >= 0 else 0
    # The line at start, of which seen - start bytes have no b"\n", then the lines after it.
    first = data.find(b"\n", seen, end or stop)
    if (first if first >= 0 else end or stop) - start > max_line:
        return start + max_line + 1
    long = _long_line(max_line).search(data, first + 1, end or stop) if first >= 0 else None
    if long is not None:
        return long.start() + max_line + 1
    return end or -1
