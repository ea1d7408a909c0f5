"""Sealing a large file's payload while the command still starts up: the header is made meanwhile.

An age file is its header, then the payload: a 16-byte nonce and the STREAM
chunks, sealed with a key derived from the file key and the nonce alone. The
header holds one stanza per recipient, and an X25519 stanza always has the
same length, so where every recipient is an X25519 key the payload's place in
the output is known before the file key is wrapped. For a large file the
command (agefast.cli.age) hands the whole job to sealed_early, which seals
the payload as any file-to-file payload (agefast.payload.file_driver: the
whole batches but the last on the compiled file kernel, which needs no GIL,
the rest through the pipeline), and meanwhile has the keys loaded, which
imports cryptography, and the file key wrapped and the header written at
the file's start: the ~25 ms of imports that came before the first batch
now overlap it.
"""

import os
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from ..payload.engine import ENGINE_AFTER, choose
from ..payload.file_driver import seal_payload
from ..payload.rules import NONCE_SIZE, payload_key, sealed_size
from ..io import reserve
from ..io.reserve import positional_fd
from ..io.writes import write_all
from ..format.grammar import Stanza, b64encode, encode_header_without_mac, encode_mac_line
from ..io.source import file_position
from ..errors import EncryptError

if TYPE_CHECKING:
    from .._typing import Recipient


def _stdlib_hmac_sha256(key: bytes, data: bytes) -> bytes:
    import hmac     # the standard library's: cryptography is not imported yet

    return hmac.digest(key, data, "sha256")


def header_size(recipients: int) -> int:
    """The length of a header with `recipients` X25519 stanzas."""
    # An X25519 stanza is the same length for every key: a 32-byte share as its
    # argument and the 32-byte wrapped file key as its body; the grammar lays it out.
    stanza = Stanza("X25519", [b64encode(bytes(32))], bytes(32))
    return len(encode_header_without_mac([stanza] * recipients)) + len(encode_mac_line(bytes(32)))


def sealed_early(src: IO[bytes], dst: Any, recipients: int, threads: int | None,
                 load_recipients: "Callable[[], list[Recipient]]") -> bool:
    """Encrypt `src` into `dst`, a new file, for `recipients` X25519 keys,
    which `load_recipients()` loads while the payload is sealed; True once done.

    False, with no key loaded and nothing read or written, where the head
    start does not apply: an output that is not a new file, an input that is not a
    regular file of at least engine.ENGINE_AFTER bytes (below that a job stays
    on cryptography), or a job the engine leaves to cryptography (--threads 1
    with the kernels not loaded, a cold kernel cache, AGEFAST_ENGINE=cryptography),
    where nothing would overlap the imports.
    """
    position = file_position(src)
    if position is None or position[1] - position[0] < ENGINE_AFTER \
            or positional_fd(dst) is None or dst.tell() != 0 or os.fstat(dst.fileno()).st_size != 0:
        return False
    size = position[1] - position[0]
    engine = choose(size, threads)
    if engine.kernels is None:
        return False
    file_key, nonce = os.urandom(16), os.urandom(NONCE_SIZE)
    key = payload_key(file_key, nonce, _stdlib_hmac_sha256)
    place = header_size(recipients)

    def write_header() -> None:
        # Run by the file driver while its workers seal after the header's
        # place: loading the keys imports cryptography, then the file key is
        # wrapped and the header written at the file's start.
        from .. import _arguments
        from ..header import make_header

        header, _ = make_header(_arguments.recipients(load_recipients()), file_key)
        if len(header) != place:
            raise EncryptError(f"the header takes {len(header)} bytes, not the {place} its payload was placed after")
        write_all(dst, header + nonce)

    with reserve.reserving(dst, 0, place + NONCE_SIZE + sealed_size(size)):
        seal_payload(src, dst, key, engine, read_at=position[0], write_at=place + NONCE_SIZE, size=size,
                     meanwhile=write_header)
        dst.flush()
    return True
