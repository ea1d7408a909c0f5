"""Hostile readers and writers, and the fragment patterns they follow.

Sources hand out data in fragments a pattern chooses (one byte, half of what
was asked, seeded random sizes, or pieces ending one byte before or after a
chunk or tag boundary); writers accept fewer bytes than they are given. A
non-blocking source returns None now and then, which agefast answers with
BlockingIOError: torture checks that this is what surfaces, and that reading
again afterwards gives either the right plaintext or a typed error, never
wrong or unverified plaintext.
"""

import random
from typing import Callable

from .primitives import CHUNK_SIZE, NONCE_SIZE, SEALED_CHUNK_SIZE

# A pattern maps (position, bytes requested) to how many bytes to hand out.
Pattern = Callable[[int, int], int]


def one_byte(pos: int, want: int) -> int:
    return 1


def half(pos: int, want: int) -> int:
    return max(1, want // 2)


def seeded(seed: int) -> Pattern:
    rng = random.Random(seed)
    sizes = (1, 2, 3, 15, 16, 17, 63, 64, 65, 4095, 4096, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1,
             SEALED_CHUNK_SIZE - 1, SEALED_CHUNK_SIZE, SEALED_CHUNK_SIZE + 1)
    return lambda pos, want: rng.choice(sizes) if rng.random() < 0.7 else rng.randint(1, 3 * SEALED_CHUNK_SIZE)


def payload_start(data: bytes) -> int:
    """Where the first chunk of a binary age file begins."""
    mac_line = data.index(b"\n---") + 1
    return data.index(b"\n", mac_line) + 1 + NONCE_SIZE


def around_boundaries(data: bytes, offset: int) -> Pattern:
    """Fragments ending `offset` bytes after every chunk and tag boundary."""
    start = payload_start(data)
    cuts = sorted({c + offset for k in range(len(data) // SEALED_CHUNK_SIZE + 2)
                   for c in (start + k * SEALED_CHUNK_SIZE, start + k * SEALED_CHUNK_SIZE + CHUNK_SIZE)
                   if 0 < c + offset < len(data)})

    def pattern(pos: int, want: int) -> int:
        nxt = next((c for c in cuts if c > pos), len(data))
        return max(1, nxt - pos)
    return pattern


class FragmentReader:
    """A reader with only read(), handing out fragments by pattern.

    Every `none_every`-th call returns None, as a non-blocking source with no
    data ready does.
    """

    def __init__(self, data: bytes, pattern: Pattern, none_every: int = 0):
        self._data = memoryview(data)
        self._pos = 0
        self._pattern = pattern
        self._none_every = none_every
        self._calls = 0

    def _take(self, want: int):
        self._calls += 1
        if self._none_every and self._calls % self._none_every == 0:
            return None
        n = min(want, self._pattern(self._pos, want), len(self._data) - self._pos)
        piece = self._data[self._pos:self._pos + n]
        self._pos += n
        return piece

    def read(self, n: int = -1):
        piece = self._take(len(self._data) if n is None or n < 0 else n)
        return None if piece is None else bytes(piece)


class FragmentRawReader(FragmentReader):
    """The same, also offering readinto(), as raw io objects do."""

    def readinto(self, b) -> int | None:
        mv = memoryview(b).cast("B")
        piece = self._take(len(mv))
        if piece is None:
            return None
        mv[:len(piece)] = piece
        return len(piece)


class ShortWriter:
    """A raw writer that accepts only as many bytes as `pattern` allows."""

    def __init__(self, pattern: Pattern, none_every: int = 0):
        self.data = bytearray()
        self._pattern = pattern
        self._none_every = none_every
        self._calls = 0

    def write(self, b) -> int | None:
        self._calls += 1
        if self._none_every and self._calls % self._none_every == 0:
            return None
        mv = memoryview(b).cast("B")
        n = min(len(mv), self._pattern(len(self.data), len(mv)))
        self.data += mv[:n]
        return n


def unaligned(data: bytes) -> memoryview:
    """`data` as a memoryview that starts one byte into its buffer."""
    buf = bytearray(len(data) + 1)
    buf[1:] = data
    return memoryview(buf)[1:]


def read_sizes(pattern: Pattern, total: int):
    """Caller-side request sizes following `pattern`, with zero-length
    requests mixed in (they must return nothing and change nothing)."""
    pos = 0
    calls = 0
    while True:
        calls += 1
        if calls % 7 == 0:
            yield 0
            continue
        n = pattern(pos, max(total - pos, 1) + 17)
        pos += n
        yield n
