"""A readable age file over a plaintext source: age 1.3's EncryptReader.

The encryptor pushes: the caller writes plaintext and the ciphertext goes to
a destination. Uploaders pull: boto3's upload_fileobj, requests' data= and
shutil.copyfileobj read from a file object. EncryptingReader turns the one
into the other without a temporary copy: each time its output runs dry it
reads one batch of plaintext from the source and writes it through an
Encryptor whose destination is its own output buffer. Memory stays at a few
batches whatever the file size, and the final chunk is sealed only once the
source has ended, so a reader stopped early never yields a file that decrypts.
"""

import io
import threading
from collections.abc import Iterable

from . import _arguments
from .io.source import Source
from ._typing import Buffer, Reader, Recipient
from .errors import again
from .streaming import Encryptor, OpenStream, read_all
from .payload.rules import CHUNK_SIZE, STREAM_BATCH, next_stream_batch

_PULL = STREAM_BATCH * CHUNK_SIZE  # plaintext read per refill, at most: the encryptor's whole batch


class _Output:
    """The encryptor's destination: ciphertext waiting to be read."""

    KEEPS_NOTHING = True    # it copies what it is given (agefast.io.callers)

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, b: memoryview) -> int:
        self.data += b
        return len(b)


class EncryptingReader(OpenStream, io.RawIOBase):
    """Reads as the age file of the plaintext read from `src`.

    read(n) returns n bytes until the file ends (uploaders take a short read
    for the end). An exception from `src` is raised again by every later read:
    what was read so far is a file without its final chunk, which never
    decrypts. A BlockingIOError from a non-blocking source loses nothing and
    the read can be retried.
    """

    _what = "encrypting reader"

    def __init__(self, src: Reader, recipients: Iterable[Recipient], *, armored: bool = False,
                 close_src: bool = False, threads: int | None = None) -> None:
        super().__init__()
        try:
            self._src = _arguments.reader("src", src)
            self._close_src = close_src
            self._source = Source(src)
            self._output = _Output()
            self._encryptor = Encryptor(self._output, recipients, armored=armored, threads=threads)
        except BaseException:
            # Closed here, as IOBase's finaliser would close it with no encryptor to abort.
            super().close()
            raise
        # A chunk's worth first and more after each full one (next_stream_batch), up to _PULL: a reader of a
        # small file (an upload of a few KiB) cleared a whole batch's buffer for it.
        self._plain = bytearray(CHUNK_SIZE)
        self._pos = 0  # of the next byte of self._output.data to hand out
        self._error: BaseException | None = None
        # Reads from several threads take turns, as on a Python file: two refills at once had read the source
        # into the one buffer together and sealed its batches out of order (a valid file of other plaintext).
        self._turn = threading.Lock()

    def readable(self) -> bool:
        self._check_open()
        return True

    def write(self, b: Buffer) -> int:
        raise io.UnsupportedOperation("an encrypting reader is read, not written")

    def read(self, size: int | None = -1, /) -> bytes | None:
        """At most `size` bytes of the age file (all the rest if negative or None); b"" at its end."""
        return super().read(-1 if size is None else size)

    def _refill(self) -> None:
        """Replace the drained output with the next batch of ciphertext."""
        self._output.data.clear()
        self._pos = 0
        n = self._source.readinto(self._plain)
        if n:
            with memoryview(self._plain) as view:
                self._encryptor.write(view[:n])
        if n < len(self._plain):  # Source fills the buffer unless the source ended
            self._encryptor.finish()
        elif len(self._plain) < _PULL:
            self._plain = bytearray(next_stream_batch(len(self._plain) // CHUNK_SIZE) * CHUNK_SIZE)

    def readinto(self, b: Buffer) -> int:
        """Fill the writable buffer `b` with the next bytes of the age file; returns the count, 0 at its end."""
        # Refused before the source is read: a batch read and sealed, and then not handed out, was lost.
        view = _arguments.writable_buffer("b", b)
        with self._turn:
            return self._readinto(view)

    def _readinto(self, b: Buffer) -> int:
        if self.closed:
            raise ValueError("read from a closed encrypting reader")
        if self._error is not None:
            raise again(self._error)
        mv = memoryview(b).cast("B")
        n = 0
        while n < len(mv):
            if self._pos == len(self._output.data):
                if self._encryptor.closed:
                    break
                try:
                    self._refill()
                except BlockingIOError:
                    if n:
                        return n
                    raise
                except BaseException as e:
                    self._error = e
                    raise
                continue
            take = min(len(mv) - n, len(self._output.data) - self._pos)
            with memoryview(self._output.data) as out:
                mv[n:n + take] = out[self._pos:self._pos + take]
            self._pos += take
            n += take
        return n

    def readall(self) -> bytes:
        """All the rest of the age file (reading `src` to its end)."""
        with self._turn:    # one turn for the whole read, as a Python file's
            return read_all(self._readinto)

    def close(self) -> None:
        """Close without sealing the final chunk (and close `src` if close_src)."""
        if self.closed:
            return
        try:
            # Never seal the final chunk on close: the source may not be done.
            self._encryptor.abort()
            if self._close_src:
                getattr(self._src, "close")()
        finally:
            super().close()


def encrypting_reader(src: Reader, recipients: Iterable[Recipient], *, armored: bool = False,
                      close_src: bool = False, threads: int | None = None) -> EncryptingReader:
    """A readable binary file object of the age file of `src`'s plaintext, to
    hand to anything that reads: boto3's upload_fileobj(reader, bucket, key),
    requests.post(url, data=reader), shutil.copyfileobj."""
    return EncryptingReader(src, recipients, armored=armored, close_src=close_src, threads=threads)
