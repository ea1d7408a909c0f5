"""The types of the public API's arguments, for type checkers.

Protocols rather than concrete classes: any object with a recipient's `wrap`
is a recipient (pyrage's and the user's own included), and any object with
a binary `read` or `write` is a file. Nothing here runs at encryption time.
"""

import os
import sys
from typing import TYPE_CHECKING, Protocol, TypeAlias

# A bytes-like object: anything memoryview() accepts (bytes, bytearray,
# memoryview, array, mmap, a NumPy array). collections.abc.Buffer is 3.12's;
# on 3.11 type checkers take typing_extensions' (they ship it), and at run
# time, where it only documents, the common cases stand for it.
if TYPE_CHECKING:
    from .format.stanza import Stanza

if sys.version_info >= (3, 12):
    from collections.abc import Buffer as Buffer
elif TYPE_CHECKING:
    from typing_extensions import Buffer as Buffer
else:
    Buffer = bytes | bytearray | memoryview

# A path, as open() takes it.
StrPath: TypeAlias = str | bytes | os.PathLike[str] | os.PathLike[bytes]


class Recipient(Protocol):
    """Anything that wraps a file key in stanzas: an age recipient."""

    def wrap(self, file_key: bytes, /) -> "list[Stanza]": ...


class Identity(Protocol):
    """Anything that unwraps a file key from stanzas (None if none is its own)."""

    def unwrap(self, stanzas: "list[Stanza]", /) -> bytes | None: ...


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
