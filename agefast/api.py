"""The public encryption and decryption entry points.

`encryptor`/`decryptor` are file objects for streaming. `encrypt_io`,
`decrypt_io` and the `*_file` functions run the whole payload through the
overlapped pipeline, and `encrypt`/`decrypt` of in-memory bytes hand the whole
payload to the chunk engine in one call.
"""

import io
import os
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from . import _arguments
from .io import cpus, reserve
from .payload import file_batches
from .payload.engine import Engine, choose
from .format import armor
from .io.buffers import Fill, new_bytes, ready_now
from .io.replace import replacing
from .io.source import MemoryReader, Source, file_position
from .io.direct import DirectReader
from .errors import EncryptError, PayloadError
from .header import make_header, open_header
from .payload.pipeline import open_stream, seal_stream
from .payload.seekable import SeekablePayload
from ._typing import Buffer, Identity, Reader, Recipient, StrPath, Writer
from .payload.rules import CHUNK_SIZE, MEMORY_STEP, NONCE_SIZE, SEALED_CHUNK_SIZE, chunk_count, payload_key, \
    plaintext_size, sealed_size
from .payload.stream import PayloadReader, PayloadWriter, open_batch
from .io.writes import flush, write_all

_READ_SIZE = 1 << 20


def _begin_file(dst: Writer, recipients: Iterable[Recipient], armored: bool) -> tuple[Any, bytes]:
    """Write the header and nonce; return (payload destination, payload key).

    The arguments are checked before anything is written."""
    _arguments.writer("dst", dst)
    _arguments.flag("armored", armored)
    header, file_key = make_header(_arguments.recipients(recipients))
    out = armor.ArmorWriter(dst) if armored else dst
    nonce = os.urandom(NONCE_SIZE)
    write_all(out, header + nonce)
    return out, payload_key(file_key, nonce)


def _open_file(src: Reader, identities: Iterable[Identity],
               armored: bool | None = None) -> tuple[Source, bytes, bool]:
    """Read the header; return (Source at the first chunk, payload key, armored).

    armored=None looks at the start of the file to tell; True reads armor
    only, as Go's armor.NewReader does (leading garbage is an ArmorError),
    and False a binary file only."""
    identities = _arguments.identities(identities)
    source = Source(_arguments.reader("src", src))
    if _arguments.armored_or_not(armored) is None:
        armored = armor.starts_armored(source)
    if armored:
        source = Source(armor.ArmorReader(source))
    return source, open_header(source, identities), bool(armored)


def _finish_file(out: object, dst: object) -> None:
    if isinstance(out, armor.ArmorWriter):
        out.close()
    flush(dst)


class AbortOnError:
    """close() on leaving a `with` block normally; abort() on leaving it
    through an exception, or when collected unclosed: an unfinished file must
    never look complete. For writers with close(), abort() and `closed`."""

    if TYPE_CHECKING:  # what the classes it is mixed into provide
        closed: bool

        def close(self) -> None: ...

        def abort(self) -> None: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        if not self.closed:
            self.abort()


class Encryptor(AbortOnError, io.RawIOBase):
    """A writable binary stream that encrypts onto `dst`.

    close() seals the final chunk. Leaving a `with` block through an exception
    does not: an interrupted file must never look complete, so it is left
    without a final chunk and fails to decrypt.
    """

    def __init__(self, dst: Writer, recipients: Iterable[Recipient], *, armored: bool = False,
                 close_dst: bool = False, threads: int | None = None) -> None:
        super().__init__()
        self._dst = dst
        self._close_dst = close_dst
        self._out, key = _begin_file(dst, recipients, armored)
        self._payload = PayloadWriter(self._out, key, choose(None, threads), _write_position(self._out))

    def writable(self) -> bool:
        return True

    def write(self, data: Buffer) -> int:
        """Encrypt `data`; returns its length. Chunks are sealed and written as they fill."""
        if self.closed:
            raise EncryptError("write to a closed encryptor")
        return self._payload.write(data)

    def close(self) -> None:
        """Seal the final chunk and finish the file (and close `dst` if close_dst)."""
        if self.closed:
            return
        try:
            self._payload.close()
            _finish_file(self._out, self._dst)
            if self._close_dst:
                getattr(self._dst, "close")()
        finally:
            super().close()

    def abort(self) -> None:
        """Stop without sealing the final chunk: the output will not decrypt."""
        io.RawIOBase.close(self)



def read_all(readinto: Callable[[bytearray], int | None]) -> bytes:
    """Everything a stream's readinto gives, read 1 MiB at a time (the
    default readall reads 8 KiB at a time)."""
    out = bytearray()
    buf = bytearray(_READ_SIZE)
    while n := readinto(buf):
        out += memoryview(buf)[:n]
    return bytes(out)


def _is_seekable(src: object) -> bool:
    seekable = getattr(src, "seekable", None)
    return seekable is not None and bool(seekable())


class Decryptor(io.RawIOBase):
    """A readable binary stream of the plaintext of `src`.

    `armored` says what the caller knows of the file: True for ASCII armor
    (anything before the BEGIN line other than whitespace is an ArmorError),
    False for a binary file, None (the default) to tell from its first bytes.

    The header is read and checked on construction. Plaintext is released only
    chunk by chunk after each chunk's tag verified; after a failure every
    further read raises the same error.

    Over a seekable, unarmored source the stream is seekable too: the final
    chunk is authenticated on construction, and seek/tell/pread work anywhere.

    A non-blocking source must have the header ready when the decryptor is
    made; after that a read that finds nothing raises BlockingIOError, and
    retrying it later carries on where it stopped.
    """

    def __init__(self, src: Reader, identities: Iterable[Identity], *, armored: bool | None = None,
                 close_src: bool = False, threads: int | None = None) -> None:
        super().__init__()
        self._src = _arguments.reader("src", src)
        self._close_src = close_src
        start: int | None = getattr(src, "tell")() if _is_seekable(src) else None
        source, key, armored = _open_file(src, identities, armored)
        self._payload: SeekablePayload | PayloadReader
        if start is not None and not armored:
            self._payload = SeekablePayload(src, start + source.consumed, key, choose(None, threads))
        else:
            self._payload = PayloadReader(source, key, choose(None, threads))

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return isinstance(self._payload, SeekablePayload)

    def _seekable_payload(self) -> SeekablePayload:
        if not isinstance(self._payload, SeekablePayload):
            raise io.UnsupportedOperation("the source is not seekable (or is armored)")
        return self._payload

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move to `offset` (from the start, the position or the end, by `whence`); returns the new position.

        Seekable decryptors only (io.UnsupportedOperation otherwise); a position
        past the end reads nothing."""
        return self._seekable_payload().seek(offset, whence)

    def tell(self) -> int:
        """The position in the plaintext (seekable decryptors only)."""
        return self._seekable_payload().pos

    def pread(self, offset: int, size: int) -> bytes:
        """Thread-safe positional read; does not move the stream position."""
        return self._seekable_payload().pread(offset, size)

    def readinto(self, b: Buffer) -> int:
        """Fill the writable buffer `b` with verified plaintext; returns the count, 0 at the end."""
        if self.closed:
            raise ValueError("read from a closed decryptor")
        return self._payload.readinto(b)

    def readall(self) -> bytes:
        """All the rest of the plaintext."""
        return read_all(self.readinto)

    def close(self) -> None:
        """Close the stream (and `src` if close_src)."""
        if not self.closed and self._close_src:
            getattr(self._src, "close")()
        super().close()


def encryptor(dst: Writer, recipients: Iterable[Recipient], *, armored: bool = False,
              close_dst: bool = False, threads: int | None = None) -> Encryptor:
    """A writable stream that encrypts to `recipients` onto the binary file `dst`.

    The header is written now; close() (or leaving a `with` block normally)
    seals the final chunk. `armored` writes ASCII armor, `close_dst` closes
    `dst` with the stream, `threads` caps the engine's threads."""
    return Encryptor(dst, recipients, armored=armored, close_dst=close_dst, threads=threads)


def decryptor(src: Reader, identities: Iterable[Identity], *, armored: bool | None = None,
              close_src: bool = False, threads: int | None = None) -> Decryptor:
    """A readable stream of the plaintext of the age file `src`, read as it goes.

    The header is read and checked now (errors as for decrypt); only verified
    plaintext is released. Over a seekable, unarmored `src` the stream is
    seekable and has pread. `armored` as for Decryptor, `close_src` closes
    `src` with the stream."""
    return Decryptor(src, identities, armored=armored, close_src=close_src, threads=threads)


def _steps(count: int) -> Iterator[tuple[int, int]]:
    """(first, stop) chunk ranges of MEMORY_STEP over `count` chunks (one, empty, for none)."""
    for first in range(0, max(count, 1), MEMORY_STEP):
        yield first, min(first + MEMORY_STEP, count)


def _beside_populating(engine: Engine, ready: Callable[[int], None]) -> Engine:
    """The engine to seal or open the steps of a new result on.

    While a thread of agefast.io.buffers faults the result's pages in ahead of
    the engine (`ready` is not ready_now), threads=None leaves it a core of
    its own once the kernels run: on the 2-core VM (AMD EPYC Zen 5,
    2026-12-02) a fresh process encrypting 256 MiB took 104 ms with the
    kernels on one thread beside it, 117 ms on two, 112 ms on cryptography
    (medians of 7); the faulting in, ~150 ms on one thread alone, is the floor.
    """
    if engine.threads is not None or ready is ready_now or engine.kernels is None:
        return engine
    return engine.on(max(1, cpus.count() - 1))


def _sealing(plaintext: Buffer, recipients: Iterable[Recipient], threads: int | None) -> tuple[int, Fill]:
    """Make the header now; return (age file size, fill(view, ready) writing the file)."""
    data = _arguments.buffer("plaintext", plaintext)
    header, file_key = make_header(_arguments.recipients(recipients))
    nonce = os.urandom(NONCE_SIZE)
    start = len(header) + NONCE_SIZE
    count = max(1, -(-len(data) // CHUNK_SIZE))
    engine = choose(len(data), threads)

    def fill(view: memoryview, ready: Callable[[int], None]) -> None:
        view[:start] = header + nonce
        key = payload_key(file_key, nonce)
        out = view[start:]
        for first, stop in _steps(count):
            ready(start + min(stop * SEALED_CHUNK_SIZE, len(out)))
            _beside_populating(engine, ready).seal(key, first, data[first * CHUNK_SIZE:stop * CHUNK_SIZE],
                                                   out[first * SEALED_CHUNK_SIZE:], stop == count)

    return start + sealed_size(len(data)), fill


def _opening(data: memoryview, identities: Iterable[Identity], threads: int | None,
             armored: bool | None) -> tuple[int, Fill] | None:
    """Open the header of a binary age file; return (plaintext size,
    fill(view, ready) writing the plaintext or raising PayloadError), or None
    if the file is armored (its size is unknown until it is decoded)."""
    identities = _arguments.identities(identities)
    source = Source(MemoryReader(data))
    armored = _arguments.armored_or_not(armored)
    if armored or (armored is None and armor.starts_armored(source)):
        return None
    key = open_header(source, identities)
    payload = data[source.consumed:]
    count = chunk_count(len(payload))
    engine = choose(len(payload), threads)

    def fill(view: memoryview, ready: Callable[[int], None]) -> None:
        # A valid payload fills the view exactly; only verified chunks are written.
        for first, stop in _steps(count):
            ready(min(stop * CHUNK_SIZE, len(view)))
            problem = open_batch(_beside_populating(engine, ready), key, first,
                                 payload[first * SEALED_CHUNK_SIZE:stop * SEALED_CHUNK_SIZE],
                                 view[first * CHUNK_SIZE:], stop == count)[2]
            if problem is not None:
                raise PayloadError(problem)

    return plaintext_size(len(payload)), fill


def _writable(buf: Buffer) -> memoryview:
    view = memoryview(buf)
    if view.readonly:
        raise TypeError("buf must be a writable buffer")
    return view.cast("B")


def _too_small(need: int) -> ValueError:
    return ValueError(f"buf must hold at least {need} bytes")


def encrypt(plaintext: Buffer, recipients: Iterable[Recipient], armored: bool = False, *,
            threads: int | None = None) -> bytes:
    """Encrypt bytes-like `plaintext` to `recipients`; returns the age file."""
    if _arguments.flag("armored", armored):
        out = io.BytesIO()
        with encryptor(out, recipients, armored=True, threads=threads) as w:
            w.write(plaintext)
        return out.getvalue()
    return new_bytes(*_sealing(plaintext, recipients, threads))


def encrypt_into(plaintext: Buffer, recipients: Iterable[Recipient], buf: Buffer, *,
                 threads: int | None = None) -> int:
    """Encrypt `plaintext` to `recipients` into the writable buffer `buf`;
    returns the length of the age file written at its start.

    As cryptography's encrypt_into: a caller who encrypts again and again
    reuses one buffer instead of faulting in a new result every time. `buf`
    must not overlap `plaintext` and must hold the header (its size depends
    on the recipients: one X25519 recipient makes 184 bytes with the nonce)
    plus the sealed payload, len(plaintext) + 16 per 64 KiB chunk; a short
    one raises ValueError naming the size needed, before anything is written.
    """
    view = _writable(buf)
    size, fill = _sealing(plaintext, recipients, threads)
    if len(view) < size:
        raise _too_small(size)
    fill(view[:size], ready_now)
    return size


def decrypt(ciphertext: Buffer, identities: Iterable[Identity], *, armored: bool | None = None,
            threads: int | None = None) -> bytes:
    """Decrypt a whole age file held in memory; returns the plaintext.

    `armored` is as for Decryptor: None tells armor from binary by the start."""
    data = _arguments.buffer("ciphertext", ciphertext)
    opening = _opening(data, identities, threads, armored)
    if opening is None:
        return Decryptor(MemoryReader(data), identities, armored=True, threads=threads).readall()
    return new_bytes(*opening)


def decrypt_into(ciphertext: Buffer, identities: Iterable[Identity], buf: Buffer, *,
                 armored: bool | None = None, threads: int | None = None) -> int:
    """Decrypt a whole age file held in memory into the writable buffer `buf`;
    returns the length of the plaintext written at its start.

    A binary file's plaintext size is known from its length: a short `buf`
    raises ValueError before anything is written. An armored file is decoded
    as it goes, so a `buf` it overflows holds verified plaintext when the
    ValueError comes. On a PayloadError `buf` holds the verified plaintext of
    the chunks before the failure, never anything unverified.
    """
    data = _arguments.buffer("ciphertext", ciphertext)
    view = _writable(buf)
    opening = _opening(data, identities, threads, armored)
    if opening is None:
        reader = Decryptor(MemoryReader(data), identities, armored=True, threads=threads)
        n = 0
        got: int | None
        while n < len(view) and (got := reader.readinto(view[n:])):
            n += got
        if reader.read(1):
            raise ValueError("buf is too small for the plaintext")
        return n
    size, fill = opening
    if len(view) < size:
        raise _too_small(size)
    fill(view[:size], ready_now)
    return size


def _write_position(writer: object) -> int | None:
    position = file_position(writer)
    return None if position is None else position[0]


def encrypt_io(reader: Reader, writer: Writer, recipients: Iterable[Recipient], armored: bool = False, *,
               threads: int | None = None) -> None:
    """Encrypt all of `reader` onto `writer`, reading, sealing and writing at once."""
    _arguments.reader("reader", reader)
    _arguments.writer("writer", writer)
    _arguments.distinct_files(reader, writer)
    out, key = _begin_file(writer, recipients, armored)
    position = file_position(reader)
    write_at = _write_position(out)
    read_at = size = None
    plain = 0
    if position is not None:
        read_at, plain = position[0], position[1] - position[0]
        size = sealed_size(plain)
    engine = choose(None if position is None else plain, threads)
    with reserve.reserving(out, write_at, size):
        with file_batches.started(file_batches.SEAL, reader, out, key, read_at, write_at, plain, engine) as head:
            counter = 0
            if head is not None:
                read_at, write_at, counter = head.finish()
            seal_stream(Source(reader).readinto, out, key, engine, read_at=read_at, write_at=write_at,
                        counter=counter)
        _finish_file(out, writer)


def decrypt_io(reader: Reader, writer: Writer, identities: Iterable[Identity], *,
               armored: bool | None = None, threads: int | None = None) -> None:
    """Decrypt all of `reader` onto `writer` (`armored` as for Decryptor).

    Only verified plaintext is written, chunk after chunk, as age writes it:
    on a PayloadError `writer` holds, from where it was, the plaintext of
    every chunk before the first that failed, and nothing after it (a file
    is cut back to that). It is not the whole plaintext: discard it, or keep
    it knowing it is a prefix (decrypt_file keeps nothing).
    """
    _arguments.reader("reader", reader)
    _arguments.writer("writer", writer)
    _arguments.distinct_files(reader, writer)
    position = file_position(reader)
    source, key, armored = _open_file(reader, identities, armored)
    offset = None
    write_at = _write_position(writer)
    size = None
    payload = 0
    if position is not None and not armored:
        offset = position[0] + source.consumed
        payload = position[1] - offset
        size = plaintext_size(payload)
    engine = choose(None if size is None else payload, threads)
    with reserve.reserving(writer, write_at, size):
        with file_batches.started(file_batches.OPEN, reader, writer, key, offset, write_at, payload, engine) as head:
            read_full, counter = source.readinto, 0
            if head is not None:
                offset, write_at, counter = head.finish()
                read_full = Source(reader).readinto   # from the rest: source read ahead of the batches
            open_stream(read_full, writer, key, engine, read_at=offset, write_at=write_at, counter=counter)
        flush(writer)


def _file_arguments(infile: StrPath, outfile: StrPath) -> tuple[str | bytes, str | bytes]:
    """The two paths, checked: TypeError for a non-path (an int would be
    taken for a file descriptor), SameFileError if they name one file."""
    src, dst = _arguments.path("infile", infile), _arguments.path("outfile", outfile)
    _arguments.distinct_paths(src, dst)
    return src, dst


def _open_input(infile: str | bytes, direct: bool) -> IO[bytes] | DirectReader:
    return DirectReader(infile) if direct else open(infile, "rb")


def encrypt_file(infile: StrPath, outfile: StrPath, recipients: Iterable[Recipient], armored: bool = False, *,
                 threads: int | None = None, direct: bool = False) -> None:
    """Encrypt the file `infile` to `outfile`, which appears only on success.

    direct=True reads and writes with O_DIRECT, bypassing the page cache,
    where the file system allows it. Input and output naming one file (also
    through a symlink or a hard link) raise SameFileError before anything is
    written.
    """
    source, target = _file_arguments(infile, outfile)
    checked = _arguments.recipients(recipients)
    _arguments.flag("armored", armored)
    with _open_input(source, direct) as src:
        with replacing(target, direct) as dst:
            encrypt_io(src, dst, checked, armored, threads=threads)


def decrypt_file(infile: StrPath, outfile: StrPath, identities: Iterable[Identity], *,
                 armored: bool | None = None, threads: int | None = None, direct: bool = False) -> None:
    """Decrypt the file `infile` to `outfile`, which appears only on success.

    As in encrypt_file, one file as input and output raises SameFileError;
    `armored` is as for Decryptor."""
    source, target = _file_arguments(infile, outfile)
    checked = _arguments.identities(identities)
    _arguments.armored_or_not(armored)
    with _open_input(source, direct) as src:
        with replacing(target, direct) as dst:
            decrypt_io(src, dst, checked, armored=armored, threads=threads)
