"""The public encryption and decryption entry points.

`encryptor`/`decryptor` are the streaming primitives; the pyrage-compatible
one-shot functions are built on them, except that `encrypt` and `decrypt` of
in-memory bytes hand the whole payload to the chunk engine in one call.
"""

import io
import os
import tempfile

from . import armor, chunks
from ._source import Source
from .errors import EncryptError, PayloadError
from .header import make_header, open_header, payload_key
from .seekable import SeekablePayload
from .stream import NONCE_SIZE, PayloadReader, PayloadWriter, open_batch, write_all

_COPY_BUFFER = 1 << 20


class Encryptor(io.RawIOBase):
    """A writable binary stream that encrypts onto `dst`.

    close() seals the final chunk. Leaving a `with` block through an exception
    does not: an interrupted file must never look complete, so it is left
    without a final chunk and fails to decrypt.
    """

    def __init__(self, dst, recipients, *, armored=False, close_dst=False, threads=None):
        super().__init__()
        header, file_key = make_header(recipients)
        self._dst = dst
        self._close_dst = close_dst
        self._armor = armor.ArmorWriter(dst) if armored else None
        out = self._armor or dst
        nonce = os.urandom(NONCE_SIZE)
        write_all(out, header + nonce)
        self._payload = PayloadWriter(out, payload_key(file_key, nonce), threads)

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if self.closed:
            raise EncryptError("write to a closed encryptor")
        return self._payload.write(data)

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._payload.close()
            if self._armor is not None:
                self._armor.close()
            flush = getattr(self._dst, "flush", None)
            if flush is not None:
                flush()
            if self._close_dst:
                self._dst.close()
        finally:
            super().close()

    def abort(self) -> None:
        """Stop without sealing the final chunk: the output will not decrypt."""
        io.RawIOBase.close(self)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self):
        # Never finalize from the garbage collector: an unclosed stream is an
        # unfinished one.
        if not self.closed:
            self.abort()


def _is_seekable(src) -> bool:
    seekable = getattr(src, "seekable", None)
    return seekable is not None and seekable()


class Decryptor(io.RawIOBase):
    """A readable binary stream of the plaintext of `src`.

    The header is read and checked on construction. Plaintext is released only
    chunk by chunk after each chunk's tag verified; after a failure every
    further read raises the same error.

    Over a seekable, unarmored source the stream is seekable too: the final
    chunk is authenticated on construction, and seek/tell/pread work anywhere.
    """

    def __init__(self, src, identities, *, close_src=False, threads=None):
        super().__init__()
        self._src = src
        self._close_src = close_src
        start = src.tell() if _is_seekable(src) else None
        source = Source(src)
        armored = armor.starts_armored(source)
        if armored:
            source = Source(armor.ArmorReader(source))
        key = open_header(source, identities)
        if start is not None and not armored:
            self._payload = SeekablePayload(src, start + source.consumed, key, threads)
        else:
            self._payload = PayloadReader(source, key, threads)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return isinstance(self._payload, SeekablePayload)

    def _seekable_payload(self) -> SeekablePayload:
        if not self.seekable():
            raise io.UnsupportedOperation("the source is not seekable (or is armored)")
        return self._payload

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._seekable_payload().seek(offset, whence)

    def tell(self) -> int:
        return self._seekable_payload().pos

    def pread(self, offset: int, size: int) -> bytes:
        """Thread-safe positional read; does not move the stream position."""
        return self._seekable_payload().pread(offset, size)

    def readinto(self, b) -> int:
        if self.closed:
            raise ValueError("read from a closed decryptor")
        return self._payload.readinto(b)

    def readall(self) -> bytes:
        out = bytearray()
        buf = bytearray(_COPY_BUFFER)
        while n := self.readinto(buf):
            out += memoryview(buf)[:n]
        return bytes(out)

    def close(self) -> None:
        if not self.closed and self._close_src:
            self._src.close()
        super().close()


def encryptor(dst, recipients, *, armored=False, close_dst=False, threads=None) -> Encryptor:
    return Encryptor(dst, recipients, armored=armored, close_dst=close_dst, threads=threads)


def decryptor(src, identities, *, close_src=False, threads=None) -> Decryptor:
    return Decryptor(src, identities, close_src=close_src, threads=threads)


def encrypt(plaintext, recipients, armored=False, *, threads=None) -> bytes:
    """Encrypt bytes-like `plaintext` to `recipients`; returns the age file."""
    if armored:
        out = io.BytesIO()
        with encryptor(out, recipients, armored=True, threads=threads) as w:
            w.write(plaintext)
        return out.getvalue()
    data = memoryview(plaintext).cast("B")
    header, file_key = make_header(recipients)
    nonce = os.urandom(NONCE_SIZE)
    start = len(header) + NONCE_SIZE
    out = bytearray(start + chunks.sealed_size(len(data)))
    out[:start] = header + nonce
    chunks.seal_chunks(payload_key(file_key, nonce), 0, data, memoryview(out)[start:], True, threads=threads)
    return bytes(out)


def decrypt(ciphertext, identities, *, threads=None) -> bytes:
    """Decrypt a whole age file held in memory; returns the plaintext."""
    data = memoryview(ciphertext).cast("B")
    source = Source(io.BytesIO(data))
    if armor.starts_armored(source):
        return Decryptor(io.BytesIO(data), identities, threads=threads).readall()
    key = open_header(source, identities)
    payload = data[source.consumed:]
    full, rest = divmod(len(payload), chunks.SEALED_CHUNK_SIZE)
    out = bytearray(full * chunks.CHUNK_SIZE + max(0, rest - chunks.TAG_SIZE))
    _, size, problem = open_batch(key, 0, payload, out, True, threads)
    if problem is not None:
        raise PayloadError(problem)
    return bytes(memoryview(out)[:size])


def _copy(reader, writer) -> None:
    buf = bytearray(_COPY_BUFFER)
    readinto = getattr(reader, "readinto", None)
    while True:
        if readinto is not None:
            n = readinto(buf)
            data = memoryview(buf)[:n or 0]
        else:
            data = reader.read(_COPY_BUFFER)
        if data is None:
            raise BlockingIOError("the reader has no data available (non-blocking read returned None)")
        if not len(data):
            return
        write_all(writer, data)


def encrypt_io(reader, writer, recipients, armored=False, *, threads=None) -> None:
    with encryptor(writer, recipients, armored=armored, threads=threads) as w:
        _copy(reader, w)


def decrypt_io(reader, writer, identities, *, threads=None) -> None:
    with decryptor(reader, identities, threads=threads) as r:
        _copy(r, writer)


def _to_file_atomically(outfile, produce) -> None:
    """Run produce(f) on a temporary file beside `outfile`, renamed on success."""
    directory = os.path.dirname(os.path.abspath(outfile))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".agefast-")
    try:
        with os.fdopen(fd, "wb") as f:
            produce(f)
        os.replace(tmp, outfile)
    except BaseException:
        os.unlink(tmp)
        raise


def encrypt_file(infile, outfile, recipients, armored=False, *, threads=None) -> None:
    with open(infile, "rb") as src:
        _to_file_atomically(outfile, lambda dst: encrypt_io(src, dst, recipients, armored, threads=threads))


def decrypt_file(infile, outfile, identities, *, threads=None) -> None:
    with open(infile, "rb") as src:
        _to_file_atomically(outfile, lambda dst: decrypt_io(src, dst, identities, threads=threads))
