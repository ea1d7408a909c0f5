"""agefast.io.source: a MemorySource reads a buffer as a Source reads a file of the same bytes."""

import io

import pytest
from hypothesis import given, strategies as st

from agefast.io.source import MemorySource, Source

# Bytes with many newlines, long enough to cross the MemorySource's first copy (4 KiB).
_DATA = st.lists(st.sampled_from([b"\n", b"a", b"bc", b"-", b"x" * 700, b"y" * 5000]), max_size=12).map(b"".join)
_STEP = st.tuples(st.sampled_from(["peek", "readline", "read", "read_lines_through"]), st.integers(0, 9000))


class _Dripping(io.RawIOBase):
    """A file that gives at most `most` bytes a read, as a pipe written a little at a time does."""

    def __init__(self, data: bytes, most: int) -> None:
        self._data, self._most, self._at = data, most, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(self._most, len(b), len(self._data) - self._at)
        b[:n] = self._data[self._at:self._at + n]
        self._at += n
        return n


@given(_DATA, st.lists(_STEP, max_size=12), st.integers(0, 6000), st.sampled_from([None, 1, 2, 7, 700]))
def test_memory_source_reads_as_a_source_of_the_same_bytes(data, steps, max_line, most):
    # A Source searches for the lines through a prefix again after each read, from what it searched before.
    memory = MemorySource(bytearray(data))
    source = Source(io.BytesIO(data) if most is None else _Dripping(data, most))
    for what, n in steps:
        if what == "read_lines_through":
            assert memory.read_lines_through(b"-", n, max_line) == source.read_lines_through(b"-", n, max_line)
        elif what == "read":
            at = source.consumed
            assert memory.read(n) == source.read(n) == data[at:at + n]
        else:
            assert getattr(memory, what)(n) == getattr(source, what)(n)
        assert memory.consumed == source.consumed


def test_a_long_line_is_found_past_the_first_copy():
    data = b"z" * 10_000 + b"\nrest"
    memory = MemorySource(memoryview(data))
    assert memory.readline(20_000) == data[:10_001]
    assert memory.readline(3) == b"res" and memory.consumed == 10_004
    # No newline within the limit: the line is cut there, as a Source cuts it.
    assert MemorySource(bytes(100_000)).readline(65_537) == bytes(65_537)


def test_lines_through_the_first_that_starts_with_the_prefix():
    data = b"a-b\n--c\n-d\nrest"
    for source in (MemorySource(data), Source(io.BytesIO(data)), Source(_Dripping(data, 1))):
        assert source.read_lines_through(b"--", 100, 10) == b"a-b\n--c\n"
        assert source.read_lines_through(b"-", 100, 10) == b"-d\n"    # the line it starts at
        assert source.read_lines_through(b"-", 100, 10) == b"rest" and source.consumed == len(data)
    long = b"z" * 10_000 + b"\n-" + b"y" * 10_000 + b"\nrest"
    assert MemorySource(long).read_lines_through(b"-", 30_000, 10_001) == long[:-4]
    assert MemorySource(long).read_lines_through(b"-", 10_005, 10_001) == long[:10_005]
    # A line longer than max_line ends the read max_line + 1 bytes into it.
    for source in (MemorySource(long), Source(io.BytesIO(long)), Source(_Dripping(long, 7))):
        assert source.read_lines_through(b"-", 30_000, 9_999) == long[:10_000]
    assert Source(_Dripping(long, 3)).read_lines_through(b"-", 30_000, 10_001) == long[:-4]


def test_a_stream_of_garbage_is_read_no_further_than_a_line_too_long():
    from agefast.errors import HeaderError
    from agefast.format.grammar import MAX_LINE, VERSION_LINE, parse_header
    from streams import Repeating

    endless = Repeating(b"A", None, prefix=VERSION_LINE + b"-> X25519 ")
    with pytest.raises(HeaderError, match="too long"):
        parse_header(Source(endless))
    assert endless.served < 2 * MAX_LINE
    # In memory, the buffer is copied no further either.
    memory = MemorySource(VERSION_LINE + b"-> X25519 " + b"A" * (4 * 1024 * 1024))
    with pytest.raises(HeaderError, match="too long"):
        parse_header(memory)
    assert len(memory._head) < 4 * MAX_LINE
