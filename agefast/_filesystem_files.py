"""The files the fsspec filesystem `age` (agefast.filesystem) opens: read with random access, written whole.

A file read is a seekable decryptor over the wrapped filesystem's file: its
header read and its final chunk authenticated on opening, then only the
sealed chunks a read's bytes live in fetched and opened. A file written is an
encryptor onto the wrapped filesystem's file, sealed on a clean close only.
"""

import contextlib
import errno
import io
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from fsspec.implementations.local import LocalFileSystem
from fsspec.spec import AbstractBufferedFile

from . import streaming
from .io import uploads
from .io.buffers import new_bytes, ready_now
from .io.replace import replacing
from ._typing import Buffer
from .payload.rules import CHUNK_SIZE, DIRECT_CHUNKS
from .errors import EncryptError, PayloadError


def armored_error(path: str) -> ValueError:
    """What opening, or sizing, an armored file through age:: is: its size and offsets are not known."""
    return ValueError(f"{path} is armored: armored age files have no random access; "
                      "decrypt them whole with agefast.decrypt")


class KeyedFileSystem(Protocol):
    """What the files need of their filesystem (AgeFileSystem): the wrapped one, the keys and the threads.

    A protocol rather than AgeFileSystem itself, which imports these files.
    """

    fs: Any
    threads: int | None

    def identities(self) -> list[Any]: ...

    def recipients(self) -> list[Any]: ...

    def invalidate_cache(self, path: str | None = None) -> None: ...


# Chunks whose plaintext an open file keeps, for reads that start or end
# inside a chunk: the next read usually begins in the same chunk (a parquet
# reader reads the footer's tail, then the footer; a CSV reader reads on).
CACHED_CHUNKS = 8
# Whole chunks a large read opens into its result between two waits for the
# result's pages (agefast.io.buffers faults them in from another thread): the
# seekable decryptor's largest batch.
_STEP = DIRECT_CHUNKS * CHUNK_SIZE

def _refuse_if_closed(f: AbstractBufferedFile) -> None:
    # As io's files: every operation on a closed one is a ValueError (fsspec's seek and tell take none).
    if f.closed:
        raise ValueError("I/O operation on closed file.")


class AgeReadFile(AbstractBufferedFile):
    """The plaintext of an age file, read with random access.

    Opening reads the header (NoIdentityMatchError for a wrong key) and
    authenticates the final chunk (PayloadError for a truncated or extended
    file), before any byte is returned. A read that touches a damaged chunk
    raises PayloadError and returns nothing of what it asked for; reads of
    intact chunks still work, as a parquet reader needs for the row groups
    that are intact.
    """

    loc: int  # the read position, AbstractBufferedFile's

    def __init__(self, fs: KeyedFileSystem, path: str, block_size: int | None = None, cache_type: str = "none",
                 cache_options: dict[str, Any] | None = None, size: int | None = None, **kwargs: Any) -> None:
        # `size`, which fsspec passes when it reopens an unpickled file, is
        # the plaintext size: it is found again below, authenticated.
        # A cache asked for (open's cache_type; Dask passes its
        # open_file_options on) applies to the wrapped file's ciphertext,
        # where it saves requests on a remote filesystem.
        # Between the decryptor and the reader an fsspec cache would copy
        # every byte once more, and decrypt ahead bytes nobody asked for.
        self._raw = fs.fs.open(path, "rb", block_size=block_size, cache_type=cache_type,
                               cache_options=cache_options)
        try:
            self._payload = streaming.decryptor(self._raw, fs.identities(), threads=fs.threads)
            if not self._payload.seekable():
                raise armored_error(path)
        except BaseException:
            self._raw.close()
            raise
        self._chunks: dict[int, bytes] = {}  # chunk index -> verified plaintext, oldest first
        self._streaming = True  # until the decryptor's stream failed, for good
        # Around the decryptor and the chunks kept: one read at a time opens chunks.
        self._lock = threading.Lock()
        # Around the position's taking and moving only, never held while anything waits.
        self._position = threading.Lock()
        # pos: where this thread's last seek left the file, and the _spent it was made in, until it reads
        self._sought = threading.local()
        self._spent = 0     # how many reads started at the shared position: each spends every seek made before it
        super().__init__(fs, path, "rb", block_size=block_size, cache_type="none",
                         size=self._payload.seek(0, io.SEEK_END), **kwargs)

    def read(self, length: int = -1) -> bytes:
        _refuse_if_closed(self)
        with self._next_bytes(-1 if length is None else length) as (start, end):
            return self._fetch_range(start, end) if start < end else b""

    def readinto(self, b: Buffer) -> int:
        # Straight into the caller's buffer; fsspec's readinto reads into a
        # new bytes object and copies that.
        _refuse_if_closed(self)
        view = memoryview(b).cast("B")
        with self._next_bytes(len(view)) as (start, end):
            if start < end:
                with self._lock:
                    self._fill(view[:end - start], ready_now, start)
        return max(end - start, 0)

    def tell(self) -> int:
        # Where this thread's next read starts (_next_bytes): fsspec's readline and readuntil seek back from it.
        _refuse_if_closed(self)
        own = self._own_seek(self._sought.__dict__.get("pos"))
        return self.loc if own is None else own

    def _own_seek(self, sought: tuple[int, int] | None) -> int | None:
        """Where this thread's last seek, its (position, _spent), left the file, if no read has started at the
        position since (_next_bytes); else None: its reads start at the position."""
        return sought[0] if sought is not None and sought[1] == self._spent else None

    def seek(self, loc: int, whence: int = io.SEEK_SET) -> int:
        # fsspec's seek, but the position it sets kept for this thread's next read (_next_bytes).
        _refuse_if_closed(self)
        bases = {io.SEEK_SET: 0, io.SEEK_CUR: self.tell(), io.SEEK_END: self.size}
        if whence not in bases:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        pos: int = bases[whence] + int(loc)
        if pos < 0:
            raise ValueError("Seek before start of file")
        self.loc = pos
        self._sought.pos = (pos, self._spent)
        return pos

    @contextlib.contextmanager
    def _next_bytes(self, length: int) -> Iterator[tuple[int, int]]:
        """The range of the next `length` bytes (negative: to the end), and the position moved past it.

        DuckDB's threads share one file, each seeking and then reading while it holds the GIL, and each must read
        where it sought; but a thread can lose the GIL between its seek and its read (a read waiting for the lock,
        or Python's switch interval), and another thread seek meanwhile. So a read starts where the same thread's
        last seek left the file, if it has not read since, and otherwise at the position: threads that share the
        file without seeking each get the next bytes. A read at the position spends the seeks made before it, as
        it spends the position they set: a file handed to another thread after a seek reads on where that
        thread's read ended, as a Python file does. The position is put back if the read fails and nothing has
        moved it since."""
        with self._position:
            start = self._own_seek(self._sought.__dict__.pop("pos", None))
            if start is None:   # a read at the position
                start = self.loc
                self._spent += 1
            end: int = self.size if length < 0 else min(start + length, self.size)
            self.loc = max(start, end)
        try:
            yield start, end
        except BaseException:
            with self._position:
                if self.loc == max(start, end):
                    self.loc = start
            raise

    def _fetch_range(self, start: int, end: int) -> bytes:
        end = min(end, self.size)
        if start >= end:
            return b""
        index, skip = divmod(start, CHUNK_SIZE)
        with self._lock:
            if end <= (index + 1) * CHUNK_SIZE:  # within one chunk
                return self._chunk(index)[skip:skip + end - start]
            return new_bytes(end - start, lambda view, ready: self._fill(view, ready, start))

    def _fill(self, view: memoryview, ready: Callable[[int], bool], start: int) -> None:
        pos, n = start, 0
        while n < len(view):
            index, skip = divmod(pos, CHUNK_SIZE)
            rest = len(view) - n
            if skip == 0:
                # Whole chunks from a chunk boundary (and a final chunk the
                # read ends with) are opened straight into the result, a
                # batch at a time as its pages are faulted in (agefast.io.buffers).
                take = rest if pos + rest == self.size else rest - rest % CHUNK_SIZE
                if take:
                    step = min(take, _STEP)
                    ready(n + step)
                    self._read_chunks(view[n:n + step], pos)
                    n += step
                    pos += step
                    continue
            chunk = self._chunk(index)
            take = min(rest, len(chunk) - skip)
            ready(n + take)
            view[n:n + take] = chunk[skip:skip + take]
            n += take
            pos += take

    def _read_chunks(self, out: memoryview, pos: int) -> None:
        if not self._streaming:
            out[:] = self._payload.pread(pos, len(out))
            return
        self._payload.seek(pos)
        n = 0
        try:
            while n < len(out):
                got = self._payload.readinto(out[n:])
                if not got:
                    raise PayloadError("the payload ended early: the file changed while being read")
                n += got
        except PayloadError:
            # A failed stream keeps failing; later reads take the positional path.
            self._streaming = False
            raise

    def _chunk(self, index: int) -> bytes:
        chunk = self._chunks.pop(index, None)
        if chunk is None:
            chunk = self._payload.pread(index * CHUNK_SIZE, CHUNK_SIZE)
            if len(self._chunks) >= CACHED_CHUNKS:
                del self._chunks[next(iter(self._chunks))]
        self._chunks[index] = chunk
        return chunk

    def close(self) -> None:
        if not self.closed:
            self._payload.close()
            self._raw.close()
            self._chunks.clear()
        super().close()


class _Aborted(Exception):
    """Thrown into replacing() to leave its file unnamed."""


class AgeWriteFile(streaming.AbortOnError, AbstractBufferedFile):
    """Writes an age file through agefast's encryptor onto the wrapped filesystem.

    close() seals the final chunk, and only then does the file take its name.
    A close while an exception raised since the file was opened is in flight
    does not (fsspec.open's `with` block closes its file without passing the
    exception on: a `with` block left through one, or an except or finally
    clause it passes through), nor does the garbage collector (a text
    wrapper's finalizer included), nor abort(): the file that had the name
    keeps it, or there is none. An exception being handled when the file was
    opened (written on a cache miss) is not such an exception: raised again
    out of the file's `with` block, it cannot be told from a close in its
    except clause, and the file is sealed; call abort() there.
    finish() seals whatever is in flight. In a child forked while the
    file was open, it is the parent's: closed there, nothing is sealed,
    named or removed. On a local disk the file is written without a name
    (agefast.io.replace), and "xb" takes its name only where none is there
    then; elsewhere "wb" writes what the store commits only at the end (S3's
    multipart upload, else the filesystem's temporary file), and "xb" a new
    file, removed on failure. A store that commits nothing (memory://) shows
    the unfinished file, which fails to decrypt.
    """

    def __init__(self, fs: KeyedFileSystem, path: str, mode: str = "wb", block_size: int | None = None,
                 autocommit: bool = True, **kwargs: Any) -> None:
        # The exception being handled as the file is opened: a close in its except clause is the user's.
        self._opened_during = sys.exc_info()[1]
        self._pid = os.getpid()
        recipients = fs.recipients()
        self._target, self._exclusive = fs.fs, mode == "xb"
        if self._exclusive and fs.fs.exists(path):
            # Refused here too: a cache's temporary file (simplecache::) takes no "x", and its discard would
            # remove the file that was there.
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
        self._placing: Any = None      # replacing(path), entered: the local file until it has its name
        self._committed_on_close = False
        if isinstance(fs.fs, LocalFileSystem):
            if fs.fs.auto_mkdir:
                fs.fs.makedirs(os.path.dirname(path), exist_ok=True)
            # "xb" too: written under its name, a kill left an unfinished file there (no removal runs then).
            self._placing = replacing(path, exclusive=self._exclusive)
            self._raw = self._placing.__enter__()
        else:
            # "xb" is committed on close (and removed on failure) except where the store's upload, committed at
            # the end, refuses a file made meanwhile: there a failure is an upload thrown away, and leaves no
            # unfinished file under the name even where the store refuses deletes (a write-only backup policy).
            self._committed_on_close = self._exclusive and not uploads.commits_exclusively(fs.fs)
            self._raw = fs.fs.open(path, mode, autocommit=self._committed_on_close)
        # What the raw file's descriptor is, where it has one: a forked child points only that at /dev/null.
        self._raw_file: tuple[int, int, int] | None = None
        with contextlib.suppress(AttributeError, OSError, ValueError):
            fd = self._raw.fileno()
            st = os.fstat(fd)
            self._raw_file = (fd, st.st_dev, st.st_ino)
        try:
            self._encryptor = streaming.encryptor(self._raw, recipients, threads=fs.threads)
        except BaseException:
            self._discard(path)
            raise
        super().__init__(fs, path, mode, block_size=block_size, autocommit=autocommit, **kwargs)
        # Sealed in a transaction (fsspec's: autocommit=False), its naming left to commit(), or discard().
        self._sealed = False
        self._made = True

    def _commit(self) -> None:
        """The written file under its name; where the store refuses it (an "xb" whose name was taken meanwhile),
        its upload thrown away, not left pending."""
        if self._placing is not None:
            self._placing.__exit__(None, None, None)
            return
        if self._committed_on_close:
            self._raw.close()
            return
        try:
            uploads.commit(self._raw)
        except BaseException:
            with contextlib.suppress(Exception):    # the commit's error is the one to tell
                uploads.discard(self._raw)
            raise

    def _discard(self, path: str) -> None:
        """The written file gone: never named, or (xb) removed."""
        if self._placing is not None:
            self._placing.__exit__(_Aborted, _Aborted(), None)
            return
        if not self._committed_on_close:
            uploads.discard(self._raw)
            return
        try:
            self._raw.close()       # which fails again where a write failed (a full disk)
        finally:
            self._target.rm(path)

    def tell(self) -> int:
        _refuse_if_closed(self)
        written: int = self.loc
        return written

    def write(self, data: Buffer) -> int:
        # Straight to the encryptor, which gathers a batch of chunks of its
        # own: AbstractBufferedFile's buffer in front of it would only copy.
        if not self.writable():
            raise ValueError("write to a closed age file")
        n = self._encryptor.write(data)
        self.loc += n
        return n

    def _upload_chunk(self, final: bool = False) -> bool:
        # Called by close() (through flush(force=True)) once it chose to finish; the buffer stays empty.
        if final:
            try:
                self._encryptor.finish()
            except BaseException:
                self._discard(self.path)
                raise
            if self.autocommit:
                self._commit()
            else:
                self._sealed = True
        return True

    def commit(self) -> None:
        """In a transaction, as it completes: the file sealed (closed first, if it was not) under its name. fsspec's
        transactions had been ignored: the file was named at its close, and stayed where the transaction failed."""
        if self._forsaken_in_a_child():
            return
        if not self.closed:
            self.close()
        if self._sealed:
            self._sealed = False
            self._commit()
            self.fs.invalidate_cache(self.path)

    def discard(self) -> None:
        """In a transaction that failed: the file not written (aborted, if it was still open)."""
        if self._forsaken_in_a_child():
            return
        if not self.closed:
            self.abort()
        elif self._sealed:
            self._sealed = False
            self._discard(self.path)
            self.fs.invalidate_cache(self.path)

    def close(self) -> None:
        if self.closed:
            return
        in_flight = sys.exc_info()[1]
        if in_flight is not None and in_flight is not self._opened_during:
            self.abort()
        else:
            super().close()

    def finish(self) -> None:
        """Seal the final chunk and give the file its name, whatever is in flight."""
        if self._forsaken_in_a_child():
            raise EncryptError("an age file opened before this process forked is the parent's to finish")
        AbstractBufferedFile.close(self)     # through flush(force=True) and _upload_chunk(final=True)

    def abort(self) -> None:
        """Stop without sealing the final chunk: the file is not written."""
        if self.closed or self._forsaken_in_a_child():
            return
        self._encryptor.abort()
        self.closed: bool = True
        try:
            self._discard(self.path)
        finally:
            self.fs.invalidate_cache(self.path)

    def _forsaken_in_a_child(self) -> bool:
        """Whether this is a child forked while the file was open, where the file is the parent's: then forsaken."""
        if os.getpid() == self._pid:
            return False
        self._forsake()
        return True

    def _forsake(self) -> None:
        """Closed in a forked child, where the file is the parent's: nothing sealed, named, discarded or removed.

        The child's copy of the file's buffer would still be flushed into the
        descriptor it shares with the parent when it is collected: its copy of
        the descriptor is pointed at /dev/null first."""
        self._encryptor.abort()
        self.closed = True
        # A store's file (fsspec's) commits from its finalizer unless it is closed: marked so, not closed.
        with contextlib.suppress(AttributeError):
            self._raw.closed = True
        if self._raw_file is None:
            return
        fd, dev, ino = self._raw_file
        with contextlib.suppress(OSError):
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (dev, ino):     # the child closed it, and the number is another file's
                return
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)
