"""The types of the public API's arguments, for type checkers.

Protocols rather than concrete classes: any object with a recipient's `wrap`
is a recipient (pyrage's and the user's own included), and any object with
a binary `read` or `write` is a file. Nothing here runs at encryption time.
"""

import os
from typing import Protocol, TypeAlias

from .format import Stanza

# A bytes-like object: what memoryview() accepts, as far as Python 3.11's
# typing can say it (collections.abc.Buffer is 3.12's).
Buffer: TypeAlias = bytes | bytearray | memoryview

# A path, as open() takes it.
StrPath: TypeAlias = str | bytes | os.PathLike[str] | os.PathLike[bytes]


class Recipient(Protocol):
    """Anything that wraps a file key in stanzas: an age recipient."""

    def wrap(self, file_key: bytes, /) -> list[Stanza]: ...


class Identity(Protocol):
    """Anything that unwraps a file key from stanzas (None if none is its own)."""

    def unwrap(self, stanzas: list[Stanza], /) -> bytes | None: ...


class SupportsRead(Protocol):
    """A binary file object with read()."""

    def read(self, size: int = ..., /) -> bytes | None: ...


class SupportsReadinto(Protocol):
    """A binary file object with readinto() (a raw or unbuffered stream)."""

    def readinto(self, buffer: memoryview, /) -> int | None: ...


# A binary file object to read from: with readinto or, failing that, read.
Reader: TypeAlias = SupportsRead | SupportsReadinto


class Writer(Protocol):
    """A binary file object to write to."""

    def write(self, data: memoryview, /) -> int | None: ...
