"""Sealing a large file's payload while the command still starts up: the header comes last.

An age file is its header, then the payload: a 16-byte nonce and the STREAM
chunks, sealed with a key derived from the file key and the nonce alone. The
header holds one stanza per recipient, and an X25519 stanza always has the
same length, so where every recipient is an X25519 key the payload's place in
the output is known before the file key is wrapped. The command
(agefast.cli) then starts sealing a large file's first batches on every
core with the compiled file kernel (agefast.kernels.seal_file), which needs
no GIL, and imports cryptography and wraps the file key meanwhile: the
~25 ms of imports that came before the first batch now overlap it. The
header is written last, at the file's start.

Only whole batches are sealed that way, none of them final. The rest of the
input, from its last batch on, goes through the pipeline as any stream does,
to its end, so an input that grew meanwhile is sealed whole; one that shrank
below a batch already started fails the command (its output is discarded).
"""

import contextlib
import os
import stat
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from . import _reserve, bech32
from .errors import EncryptError

if TYPE_CHECKING:
    from . import kernels
    from ._typing import Recipient

# Below this, loading the kernels and starting threads cost about what the
# head start gains; the pipeline moves to the kernels from the same size on
# (chunks.ENGINE_AFTER).
MIN_SIZE = 32 << 20
NONCE_SIZE = 16
_HEADER_START = len(b"age-encryption.org/v1\n")
_X25519_STANZA = len(b"-> X25519 \n\n") + 2 * 43    # a 32-byte share and a 32-byte body, unpadded base64
_MAC_LINE = len(b"--- \n") + 43


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


def header_size(recipients: int) -> int:
    """The length of a header with `recipients` X25519 stanzas."""
    return _HEADER_START + recipients * _X25519_STANZA + _MAC_LINE


def payload_key(file_key: bytes, nonce: bytes) -> bytes:
    """HKDF-SHA-256(file key, salt=nonce, info="payload"), age's payload key (RFC 5869:
    one block of output), from the standard library: cryptography is not imported yet."""
    import hmac     # here: a small file's command needs none of this module's imports

    pseudorandom_key = hmac.digest(nonce, file_key, "sha256")
    return hmac.digest(pseudorandom_key, b"payload\x01", "sha256")


def _regular_fd(f: Any) -> int | None:
    try:
        fd: int = f.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (AttributeError, OSError, ValueError):
        return None


class EarlyPayload:
    """A payload being sealed into `dst` after room for its header; finish() writes the rest."""

    def __init__(self, src: IO[bytes], src_fd: int, size: int, dst: Any, dst_fd: int, recipients: int,
                 threads: int | None) -> None:
        from . import kernels

        self._src, self._dst, self._dst_fd = src, dst, dst_fd
        self._threads = threads
        self._header_size = header_size(recipients)
        self._file_key = os.urandom(16)
        self._nonce = os.urandom(NONCE_SIZE)
        self._key = payload_key(self._file_key, self._nonce)
        self._read_at = src.tell()
        self._payload_at = self._header_size + NONCE_SIZE
        self._chunks_per_batch = kernels.FILE_BATCH
        self._batch = kernels.FILE_BATCH * kernels.CHUNK_SIZE
        self._sealed_batch = kernels.FILE_BATCH * kernels.SEALED_CHUNK_SIZE
        # Whole batches short of the end: the last (final) one is the pipeline's.
        self._batches = (size - 1) // self._batch
        sealed = size + kernels.TAG_SIZE * -(-size // kernels.CHUNK_SIZE)
        self._reserved = _reserve.reserve(dst, 0, self._payload_at + sealed)
        try:
            self._sealing = kernels.seal_file(self._key, src_fd, self._read_at, dst_fd, self._payload_at,
                                              self._batches, threads)
        except BaseException:
            _reserve.release(dst, self._reserved)
            raise

    def finish(self, recipients: "list[Recipient]") -> None:
        """Make and write the header for `recipients` (X25519 keys, as many as
        the payload was placed for), then seal the rest of the input."""
        from . import _arguments
        from ._source import Source
        from .header import make_header
        from .pipeline import seal_stream

        header, _ = make_header(_arguments.recipients(recipients), self._file_key)
        if len(header) != self._header_size:
            raise EncryptError(f"the header takes {len(header)} bytes, not the {self._header_size} "
                               "its payload was placed after")
        try:
            self._sealing.wait()
        except EOFError:
            raise EncryptError("the input file shrank while it was encrypted") from None
        read_at = self._read_at + self._batches * self._batch
        write_at = self._payload_at + self._batches * self._sealed_batch
        self._src.seek(read_at)
        self._dst.seek(write_at)
        seal_stream(Source(self._src).readinto, self._dst, self._key, self._threads, read_at=read_at,
                    write_at=write_at, counter=self._batches * self._chunks_per_batch)
        self._dst.flush()
        written = os.pwrite(self._dst_fd, header + self._nonce, 0)
        if written != len(header) + NONCE_SIZE:
            raise OSError(f"wrote {written} of the header's {len(header) + NONCE_SIZE} bytes")

    def stop(self) -> None:
        """End the workers (after their batches under way) and give back what was reserved past the output's end."""
        self._sealing.stop()
        _reserve.release(self._dst, self._reserved)


@contextlib.contextmanager
def started(src: IO[bytes], dst: Any, recipients: int, threads: int | None) -> Iterator[EarlyPayload | None]:
    """The payload of `src` being sealed into `dst` for `recipients` X25519 keys, or
    None where that does not apply: an input that is not a regular file of at
    least MIN_SIZE bytes, or an output that is not a new regular file.

    The workers are stopped before the block is left, however it is left: the
    files are never closed under them.
    """
    src_fd, dst_fd = _regular_fd(src), _regular_fd(dst)
    payload = None
    if src_fd is not None and dst_fd is not None and dst.tell() == 0 and os.fstat(dst_fd).st_size == 0:
        size = os.fstat(src_fd).st_size - src.tell()
        if size >= MIN_SIZE:
            payload = EarlyPayload(src, src_fd, size, dst, dst_fd, recipients, threads)
    try:
        yield payload
    finally:
        if payload is not None:
            payload.stop()
