"""Random access to the payload of a seekable age file.

The payload can be seeked by chunk: chunk i sits at a fixed offset and is
opened on its own. Before releasing anything, the reader opens the final
chunk at the end of the file as the streaming reader opens the end of a
payload (agefast.payload.stream.open_batch), so the plaintext length is
trusted: a file that was truncated, extended, or had its last chunk moved
fails on open, before any plaintext is released, with the type of error the
stream gives (a whole last chunk that verifies as a middle one: the file was
cut at a chunk boundary), and its message where the file was cut or extended
by less than a chunk (docs/random-access.md).
"""

import io
import operator
import threading
from typing import Any

from ..io.portable import pread, pread_into
from ..io.reserve import positional_fd
from .engine import Engine
from ..errors import PayloadError, TruncatedError, again
from .rules import (CHUNK_SIZE, DIRECT_CHUNKS, PEEK_SIZE, SEALED_CHUNK_SIZE, STREAM_BATCH, TAG_SIZE, chunk_count,
                    plaintext_size)
from .stream import open_batch

# The file shrank under the reader: a read returned fewer bytes than it held when opened.
_SHRANK = "the file is truncated: it shrank while it was read"


class SeekablePayload:
    """The plaintext of the payload in `src` from byte `start` to its end."""

    def __init__(self, src: Any, start: int, payload_key: bytes, engine: Engine) -> None:
        self._src = src
        self._start = start
        self._key = payload_key
        self._engine = engine
        self._lock = threading.Lock()
        # Read at any offset by pread only where src is a standard file object over its descriptor: a gzip or
        # bz2 file has a fileno() too, of the compressed file, which its offsets do not count.
        self._fd = positional_fd(src)
        end: int = src.seek(0, io.SEEK_END)
        self._chunks = chunk_count(end - start)
        self.size = plaintext_size(end - start)
        # Open the end of the payload now, so `size` can be trusted: the final
        # chunk, and where the bytes after the last whole chunk are too few to
        # be a final chunk (a tag or less), the chunk before them too, which
        # tells a cut (it verifies as a middle chunk) from bytes after a whole
        # final chunk (it verifies as the final one), as in a stream.
        # No larger than the file: buffers of STREAM_BATCH chunks were most of opening a small one (2026-12-06).
        batch = max(1, min(STREAM_BATCH, self._chunks))
        self._plain = bytearray(batch * CHUNK_SIZE)
        self._sealed = bytearray(batch * SEALED_CHUNK_SIZE)
        rest = (end - start) % SEALED_CHUNK_SIZE
        first = max(0, self._chunks - (2 if 0 < rest <= TAG_SIZE else 1))
        problem = self._open_end(first, end)
        if problem is not None and 0 < first == self._chunks - 1:
            # Its error as the stream's: the whole chunk before a tail that does not open as the final chunk
            # tells bytes after a final chunk ("trailing data") from a damaged or cut end.
            problem = self._open_end(first - 1, end)
        if problem is not None:
            raise problem
        self.pos = 0
        # The chunk a load stopped at last, and why: the reads that reach it fail, reads elsewhere load their own.
        self._failure: tuple[int, PayloadError] | None = None

    def _open_end(self, first: int, end: int) -> PayloadError | None:
        """Open the chunks from `first` to the end of the file (at `end`) as the stream opens the end of a
        payload, cached; why the payload is invalid, if it is."""
        tail = memoryview(self._sealed)[:end - self._start - first * SEALED_CHUNK_SIZE]
        if self._pread(tail, self._start + first * SEALED_CHUNK_SIZE) != len(tail):
            raise TruncatedError(_SHRANK)
        # the cached chunks: [first, first + count)
        self._first = first
        self._count, _, problem = open_batch(self._engine, self._key, first, tail, self._plain, True)
        return problem

    def left(self) -> int:
        """The bytes from the position to the end (none past it)."""
        return max(self.size - self.pos, 0)

    def _pread(self, buf: memoryview, offset: int) -> int:
        if self._fd is not None:
            # The descriptor is the source's: once the source is closed its number may be another file's.
            if self._src.closed:
                raise ValueError("I/O operation on closed file")
            n = 0
            while n < len(buf):
                got = pread_into(self._fd, buf[n:], offset + n)
                if got == 0:
                    break
                n += got
            return n
        with self._lock:
            self._src.seek(offset)
            n = 0
            while n < len(buf):
                got = self._src.readinto(buf[n:])
                if not got:
                    break
                n += got
            return n

    def _load(self, first: int, plain: bytearray | memoryview,
              sealed: bytearray) -> tuple[int, PayloadError | None]:
        """Open chunks from `first` on, as many as `plain` holds, into it.

        Returns how many verified, in order, and the error that stopped it.
        """
        count = min(len(plain) // CHUNK_SIZE, self._chunks - first)
        final = first + count == self._chunks
        size = count * SEALED_CHUNK_SIZE
        if final:
            size += self.size - self._chunks * CHUNK_SIZE
        view = memoryview(sealed)[:size]
        got = self._pread(view, self._start + first * SEALED_CHUNK_SIZE)
        if got != size:
            # The file shrank: the whole chunks that came are opened (none of them the final one), and the first
            # that did not fails, so that the reads of the chunks before it still succeed.
            count, final = got // SEALED_CHUNK_SIZE, False
            view = view[:count * SEALED_CHUNK_SIZE]
        ok = self._engine.open(self._key, first, view, plain, final) if count else 0
        if ok != count:
            return ok, PayloadError(f"failed to authenticate payload chunk {first + ok}")
        return ok, None if got == size else TruncatedError(_SHRANK)

    def _open_chunk(self, index: int) -> bytes:
        """Chunk `index`'s plaintext, opened on its own into new bytes."""
        final = index == self._chunks - 1
        size = self.size - index * CHUNK_SIZE + TAG_SIZE if final else SEALED_CHUNK_SIZE
        offset = self._start + index * SEALED_CHUNK_SIZE
        if self._fd is not None:
            sealed = pread(self._fd, size, offset)
            while 0 < len(sealed) < size:
                more = pread(self._fd, size - len(sealed), offset + len(sealed))
                if not more:
                    break
                sealed += more
        else:
            buffer = bytearray(size)
            sealed = bytes(buffer[:self._pread(memoryview(buffer), offset)])
        if len(sealed) != size:
            raise TruncatedError(_SHRANK)
        plain = self._engine.open_chunk(self._key, index, sealed, final)
        if plain is None:
            raise PayloadError(f"failed to authenticate payload chunk {index}")
        return plain

    def _cached(self, index: int) -> bool:
        return self._first <= index < self._first + self._count

    def _failed(self, index: int) -> PayloadError | None:
        """Why chunk `index` failed, if it is the one a load stopped at last."""
        return self._failure[1] if self._failure is not None and self._failure[0] == index else None

    def readinto(self, b: Any) -> int:
        mv = memoryview(b).cast("B")
        n = 0
        while n < len(mv) and self.pos < self.size:
            index = self.pos // CHUNK_SIZE
            failed = self._failed(index)
            if failed is not None:
                # The verified chunks before it first; the reads that reach it fail, and no other.
                if n:
                    return n
                raise again(failed)
            whole = min((len(mv) - n) // CHUNK_SIZE, DIRECT_CHUNKS)
            if whole and self.pos % CHUNK_SIZE == 0 and not self._cached(index):
                # Whole chunks are opened straight into the caller's buffer,
                # which Engine.open never leaves unverified plaintext in.
                got = self._direct(index, mv[n:n + whole * CHUNK_SIZE])
                n += got
                self.pos += got
                continue
            if not self._cached(index):
                self._cache(index)
                continue
            offset = self.pos - self._first * CHUNK_SIZE
            take = min(len(mv) - n, self._count * CHUNK_SIZE - offset, self.size - self.pos)
            mv[n:n + take] = memoryview(self._plain)[offset:offset + take]
            n += take
            self.pos += take
        return n

    def _cache(self, index: int) -> None:
        """Open the chunks from `index` on into the cache, up to the first that fails (kept as the failure)."""
        self._count = 0  # the buffer is about to be overwritten
        self._count, error = self._load(index, self._plain, self._sealed)
        self._first = index
        if error is not None:
            self._failure = (index + self._count, error)

    def peek(self) -> bytes:
        """Verified plaintext from the position on, without moving it: up to PEEK_SIZE bytes of the cached chunks,
        opened now if need be; b"" at the end."""
        while self.pos < self.size:
            index = self.pos // CHUNK_SIZE
            failed = self._failed(index)
            if failed is not None:
                raise again(failed)
            if not self._cached(index):
                self._cache(index)
                continue
            offset = self.pos - self._first * CHUNK_SIZE
            end = min(self._count * CHUNK_SIZE, self.size - self._first * CHUNK_SIZE, offset + PEEK_SIZE)
            return bytes(self._plain[offset:end])
        return b""

    def _direct(self, index: int, out: memoryview) -> int:
        """Open chunks from `index` on into `out`; return the plaintext bytes
        verified before any failure, which is kept as the failed chunk's."""
        if len(self._sealed) < len(out) // CHUNK_SIZE * SEALED_CHUNK_SIZE:
            self._sealed = bytearray(len(out) // CHUNK_SIZE * SEALED_CHUNK_SIZE)
        ok, error = self._load(index, out, self._sealed)
        if error is not None:
            self._failure = (index + ok, error)
        return min(ok * CHUNK_SIZE, self.size - index * CHUNK_SIZE)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        offset, whence = operator.index(offset), operator.index(whence)   # TypeError for 1.5, as files give
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self.pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if pos < 0:
            raise ValueError("negative seek position")
        self.pos = pos
        return pos

    def pread(self, offset: int, size: int) -> bytes:
        """Read `size` bytes at `offset` without moving the cursor.

        Safe to call from many threads at once: each call opens its chunks
        into buffers of its own.
        """
        if offset < 0 or size < 0:
            raise ValueError("negative offset or size")
        end = min(offset + size, self.size)
        if end <= offset:
            return b""
        index = offset // CHUNK_SIZE
        if (end - 1) // CHUNK_SIZE == index:
            # Within one chunk, as most reads at random are: the chunk is
            # opened into new bytes, which are the result when the read is
            # the whole chunk. Through the loop below, its buffers and
            # copies, one 64 KiB chunk took 31.3 us where cryptography
            # decrypts it in 19.6 (2026-12-05, Zen 4).
            opened = self._open_chunk(index)
            skip = offset - index * CHUNK_SIZE
            return opened if skip == 0 and end - offset == len(opened) else opened[skip:skip + end - offset]
        out = bytearray(end - offset)
        pos = offset
        while pos < end:
            index = pos // CHUNK_SIZE
            count = min(STREAM_BATCH, -(-end // CHUNK_SIZE) - index)
            plain = bytearray(count * CHUNK_SIZE)
            _, error = self._load(index, plain, bytearray(count * SEALED_CHUNK_SIZE))
            if error is not None:
                raise error
            skip = pos - index * CHUNK_SIZE
            take = min(end - pos, count * CHUNK_SIZE - skip)
            out[pos - offset:pos - offset + take] = memoryview(plain)[skip:skip + take]
            pos += take
        return bytes(out)
