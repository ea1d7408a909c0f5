"""Sealing a large file's payload while the command still starts up: the header comes last.

An age file is its header, then the payload: a 16-byte nonce and the STREAM
chunks, sealed with a key derived from the file key and the nonce alone. The
header holds one stanza per recipient, and an X25519 stanza always has the
same length, so where every recipient is an X25519 key the payload's place in
the output is known before the file key is wrapped. The command
(agefast.cli.age) then starts sealing a large file's batches, as any
file-to-file payload (agefast.payload.file_batches: the whole ones but the last on
the compiled file kernel, which needs no GIL, the rest through the
pipeline), and imports cryptography and wraps the file key meanwhile: the
~25 ms of imports that came before the first batch now overlap it. The
header is written last, at the file's start.
"""

import contextlib
import os
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from ..payload import file_batches
from ..payload.engine import choose
from ..payload.rules import NONCE_SIZE, payload_key, sealed_size
from ..io import reserve
from ..io.reserve import positional_fd
from ..format import bech32
from ..format.grammar import Stanza, b64encode, encode_header_without_mac, encode_mac_line
from ..io.source import file_position
from ..errors import EncryptError

if TYPE_CHECKING:
    from ..payload.engine import Engine
    from .._typing import Recipient



def is_x25519(recipient: str) -> bool:
    """Whether agefast.keys.parse_recipient reads `recipient` as an X25519 key:
    "age1" and Bech32 data with no other "1" (that would be a plugin's or
    another type's), 32 bytes long."""
    if not recipient.startswith("age1") or recipient.count("1") != 1:
        return False
    try:
        hrp, data = bech32.decode(recipient)
    except bech32.Bech32Error:
        return False
    return hrp == "age" and len(data) == 32


def _stdlib_hmac_sha256(key: bytes, data: bytes) -> bytes:
    import hmac     # the standard library's: cryptography is not imported yet

    return hmac.digest(key, data, "sha256")


def header_size(recipients: int) -> int:
    """The length of a header with `recipients` X25519 stanzas."""
    # An X25519 stanza is the same length for every key: a 32-byte share as its
    # argument and the 32-byte wrapped file key as its body; the grammar lays it out.
    stanza = Stanza("X25519", [b64encode(bytes(32))], bytes(32))
    return len(encode_header_without_mac([stanza] * recipients)) + len(encode_mac_line(bytes(32)))


class EarlyPayload:
    """A payload under way into `dst` after room for its header; finish() writes the rest and the header."""

    def __init__(self, head: file_batches.Head, engine: "Engine", src: IO[bytes], dst: Any, file_key: bytes,
                 nonce: bytes, key: bytes, header_size: int) -> None:
        self._head, self._engine, self._src, self._dst = head, engine, src, dst
        self._file_key, self._nonce, self._key = file_key, nonce, key
        self._header_size = header_size

    def finish(self, recipients: "list[Recipient]") -> None:
        """Make and write the header for `recipients` (X25519 keys, as many as
        the payload was placed for), and seal the rest of the input."""
        from .. import _arguments
        from ..io.source import Source
        from ..header import make_header
        from ..payload.pipeline import seal_stream
        from ..io.writes import write_all

        header, _ = make_header(_arguments.recipients(recipients), self._file_key)
        if len(header) != self._header_size:
            raise EncryptError(f"the header takes {len(header)} bytes, not the {self._header_size} "
                               "its payload was placed after")
        read_at, write_at, counter = self._head.finish()
        seal_stream(Source(self._src).readinto, self._dst, self._key, self._engine, read_at=read_at,
                    write_at=write_at, counter=counter)
        self._dst.seek(0)
        write_all(self._dst, header + self._nonce)
        self._dst.flush()


@contextlib.contextmanager
def started(src: IO[bytes], dst: Any, recipients: int, threads: int | None) -> Iterator[EarlyPayload | None]:
    """The payload of `src` under way into `dst` for `recipients` X25519 keys, or
    None where that does not apply: an output that is not a new file, or a
    payload that agefast.payload.file_batches leaves to the pipeline (an input that
    is not a regular file of at least its MIN_SIZE bytes, --threads 1, a cold
    kernel cache, AGEFAST_ENGINE=cryptography).

    The workers are stopped before the block is left, however it is left: the
    files are never closed under them.
    """
    position = file_position(src)
    if position is None or position[1] - position[0] < file_batches.MIN_SIZE \
            or positional_fd(dst) is None or dst.tell() != 0 or os.fstat(dst.fileno()).st_size != 0:
        yield None
        return
    file_key, nonce = os.urandom(16), os.urandom(NONCE_SIZE)
    key = payload_key(file_key, nonce, _stdlib_hmac_sha256)
    size = position[1] - position[0]
    header = header_size(recipients)
    engine = choose(size, threads)
    with reserve.reserving(dst, 0, header + NONCE_SIZE + sealed_size(size)), \
            file_batches.started(file_batches.SEAL, src, dst, key, position[0], header + NONCE_SIZE, size,
                                 engine) as head:
        yield None if head is None else EarlyPayload(head, engine, src, dst, file_key, nonce, key, header)
