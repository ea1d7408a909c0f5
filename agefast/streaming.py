"""The streaming file objects: `encryptor` (a writable stream) and `decryptor` (a readable one).

Both write or read the header here and move the payload through the job's
engine, a batch at a time (agefast.payload.stream; random access through
agefast.payload.seekable). begin_file and open_file are the header's two
halves that every other way in (agefast.api) shares.
"""

import io
import os
import threading
import warnings
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from . import _arguments
from ._typing import Buffer, Identity, Reader, Recipient, Writer
from .errors import EncryptError
from .format import armor
from .header import make_header, open_header
from .io.buffers import new_bytes
from .io.source import Source, file_position
from .io.writes import flush, write_all
from .payload.engine import choose
from .payload.rules import CHUNK_SIZE, MEMORY_STEP, NONCE_SIZE, payload_key
from .payload.seekable import SeekablePayload
from .payload.stream import PayloadReader, PayloadWriter

_READ_SIZE = 1 << 20
# A read of known size asks for its result's pages this much at a time (agefast.io.buffers), the step
# decrypt's result is opened in (agefast.payload.steps).
_KNOWN_STEP = MEMORY_STEP * CHUNK_SIZE


def begin_file(dst: Writer, recipients: Iterable[Recipient], armored: bool) -> tuple[Any, bytes]:
    """Write the header and nonce; return (payload destination, payload key).

    The arguments are checked before anything is written."""
    _arguments.writer("dst", dst)
    _arguments.flag("armored", armored)
    header, file_key = make_header(_arguments.recipients(recipients))
    out = armor.ArmorWriter(dst) if armored else dst
    nonce = os.urandom(NONCE_SIZE)
    write_all(out, header + nonce)
    return out, payload_key(file_key, nonce)


def open_file(src: Reader, identities: Iterable[Identity],
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


def finish_file(out: object, dst: object) -> None:
    if isinstance(out, armor.ArmorWriter):
        out.close()
    flush(dst)


class OpenStream:
    """Refuses pickle, copy and deepcopy, as Python's own files do: a copy would share the stream's position and
    its payload's chunks, and one closed would seal the file the other still writes. Not seekable, and asked
    once closed, says so as they do (a ValueError)."""

    if TYPE_CHECKING:  # what io.RawIOBase, which it is mixed into, provides
        closed: bool

    _what = "stream"    # what the class is, in its messages

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(f"cannot pickle or copy {type(self).__name__!r} object: it is an open stream")

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O operation on a closed {self._what}")

    def seekable(self) -> bool:
        self._check_open()
        return False

    def readable(self) -> bool:
        self._check_open()
        return False

    def writable(self) -> bool:
        self._check_open()
        return False


class AbortOnError:
    """close() on leaving a `with` block normally; abort() on leaving it
    through an exception, or when collected unclosed: an unfinished file must
    never look complete. For writers with finish(), abort() and `closed`.

    A wrapper collected unclosed (io.TextIOWrapper, io.BufferedWriter)
    closes what it wraps from its finalizer, after telling it so
    (_dealloc_warn): that close aborts too. Any other close() finishes.
    """

    if TYPE_CHECKING:  # what the classes it is mixed into provide
        closed: bool

        def finish(self) -> None: ...

        def abort(self) -> None: ...

    _wrapper_collected = False      # a class attribute: the value where __init__ did not get as far
    _made = False                   # set where __init__ ends: a writer it refused was never the user's to close

    def _warn_unclosed(self) -> None:
        # As Python's files are told of when collected unclosed: a forgotten close() loses the file.
        if self._made:
            warnings.warn(f"unclosed {type(self).__name__}: its file was left unfinished (close() seals it)",
                          ResourceWarning, source=self)

    def _dealloc_warn(self, source: object) -> None:
        # CPython's TextIOWrapper and BufferedWriter call this on what they
        # wrap from their finalizer, just before they close it: collected
        # unclosed, so that close is no close of the user's.
        self._wrapper_collected = True
        self._warn_unclosed()

    def close(self) -> None:
        if self.closed:
            return
        if self._wrapper_collected:
            self.abort()
        else:
            self.finish()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abort()

    def __del__(self) -> None:
        if not self.closed:
            self._warn_unclosed()
            self.abort()


class Encryptor(OpenStream, AbortOnError, io.RawIOBase):
    """A writable binary stream that encrypts onto `dst`.

    close() (or finish()) seals the final chunk, as does leaving a `with`
    block normally. Leaving it through an exception does not: an interrupted
    file must never look complete, so it is left without a final chunk and
    fails to decrypt. Nor does the close of a wrapper (io.TextIOWrapper)
    collected unclosed. A wrapper's own `with` block closes the encryptor
    whatever happened in it: there, call abort() on an exception.

    Writes from several threads take turns. A call made inside another on
    its own thread (from a signal handler, or by a dst that writes back into
    it) raises RuntimeError, as io.BufferedWriter's; but abort(), which ends
    the stream unsealed. flush() writes every chunk but the last (which may
    turn out to be the final one) and flushes dst. In a child the process
    forked, an encryptor made before the fork cannot be written or finished:
    parent and child would seal two plaintexts under the same chunk numbers.
    """

    _what = "encryptor"

    def __init__(self, dst: Writer, recipients: Iterable[Recipient], *, armored: bool = False,
                 close_dst: bool = False, threads: int | None = None) -> None:
        super().__init__()
        # Two writes at once had each sealed a chunk under the same number: the keystream twice. (First: a
        # refused encryptor is aborted by its finaliser.) Reentrant, and _inside says which call holds it: a
        # call inside another on its thread had waited for itself for ever (abort() from a SIGTERM handler).
        self._turn = threading.RLock()
        self._inside: str | None = None
        self._pid = os.getpid()
        self._dst = dst
        self._close_dst = close_dst
        self._out, key = begin_file(dst, recipients, armored)
        self._payload = PayloadWriter(self._out, key, choose(None, threads), write_position(self._out))
        self._failed: str | None = None     # what a write raised: the stream can be neither written nor sealed
        self._made = True

    def writable(self) -> bool:
        self._check_open()
        return True

    def readinto(self, b: Buffer) -> int:
        raise io.UnsupportedOperation("an encryptor is written, not read")

    def _forked(self) -> EncryptError | None:
        if os.getpid() == self._pid:
            return None
        return EncryptError("an encryptor made before this process forked is the parent's: its chunk numbers "
                            "would seal two plaintexts")

    def write(self, data: Buffer) -> int:
        """Encrypt `data`; returns its length. Chunks are sealed and written as they fill.

        A write that raises (dst failed, or would block) ends the stream: every
        later write and close() raise EncryptError, and nothing more is sealed.
        """
        if forked := self._forked():     # before the turn: a thread of the parent may have held it at the fork
            raise forked
        with self._turn:
            if self._inside is not None:
                raise self._reentered("write")
            if self.closed:
                raise EncryptError("write to a closed encryptor")
            if self._failed is not None:
                raise EncryptError(f"write to an encryptor that failed ({self._failed}): start the file again")
            view = _arguments.buffer("data", data)     # an argument that is no buffer fails here, before anything moved
            # Written out, not through helpers: they were 0.24 us more a write (4 KiB writes 5% slower)
            self._inside = "write"
            try:
                return self._payload.write(view)
            except BaseException as e:
                self._fail(e)
                raise
            finally:
                self._inside = None

    def flush(self) -> None:
        """Write every chunk written so far but the last, which may be the final one, and flush dst. Nothing
        inside another call of this encryptor (its own close flushes), nor in a child the process forked."""
        if self._forked():
            return
        with self._turn:
            if self._inside is not None or self.closed:
                return
            if self._failed is not None:
                raise EncryptError(f"flush of an encryptor that failed ({self._failed}): start the file again")
            self._inside = "flush"
            try:
                self._payload.flush()
                flush(self._dst)
            except BaseException as e:
                self._fail(e)
                raise
            finally:
                self._inside = None

    def _reentered(self, what: str) -> RuntimeError:
        return RuntimeError(f"reentrant call: {what}() inside the encryptor's {self._inside}()")

    def _fail(self, e: BaseException) -> None:
        """The stream ends where moving plaintext onto dst raised `e`. Which chunks reached dst is not known:
        going on would seal new plaintext under chunk numbers dst already has, the same keystream twice, which
        gives away both plaintexts' XOR."""
        self._failed = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__

    def finish(self) -> None:
        """Seal the final chunk and finish the file (and close `dst` if close_dst), whatever is in flight."""
        if forked := self._forked():
            if not self.closed:
                io.RawIOBase.close(self)
                raise forked
            return
        with self._turn:
            if self._inside is not None:
                raise self._reentered("finish")
            if self.closed:
                return
            if self._failed is not None:
                self._end(failing=True)
                raise EncryptError(f"the encryptor failed ({self._failed}): the file was not finished")
            self._inside = "finish"
            try:
                self._payload.close()
                finish_file(self._out, self._dst)
            except BaseException:
                self._end(failing=True)
                raise
            finally:
                self._inside = None
            self._end(failing=False)

    def abort(self) -> None:
        """Stop without sealing the final chunk: the output will not decrypt."""
        if self._forked():
            # dst is left to the parent: a buffered one's close here would write the parent's pending bytes again.
            io.RawIOBase.close(self)
            return
        with self._turn:
            if self._inside == "write" or self._inside == "flush":
                # Inside a write on this thread (a signal handler's abort): the write goes on where it was, so
                # the stream is only marked; nothing more is sealed, and its end (or collection) aborts it.
                self._failed = "aborted"
                return
            if self._inside is not None:
                raise self._reentered("abort")
            if not self.closed:
                self._end(failing=True)

    def _end(self, failing: bool) -> None:
        """Closed, and dst with it where close_dst asked, however the stream ended (an aborted or failed one had
        left dst open: a descriptor lost per file). Where it fails, its own error is told, not dst's close's."""
        self._inside = "close"      # IOBase.close flushes first: nothing of the payload's is to move any more
        try:
            io.RawIOBase.close(self)
        finally:
            self._inside = None
        # One whose making failed was never the caller's: dst stays open, as it was handed over.
        if self._close_dst and self._made:
            try:
                getattr(self._dst, "close")()
            except Exception:
                if not failing:
                    raise


def read_all(readinto: Callable[[Buffer], int | None], left: int | None = None) -> bytes:
    """Everything a stream's readinto gives: where the size `left` is known,
    read straight into the result (agefast.io.buffers, as decrypt's: a
    256 MiB file took 250 ms read through a buffer, a growing copy and a
    last copy, 2026-12-07); else in reads of 64 KiB growing to 1 MiB (the
    default readall reads 8 KiB at a time)."""
    if left is not None:
        return _read_known(readinto, left)
    out = bytearray()
    buf = bytearray(CHUNK_SIZE)
    while True:
        try:
            n = readinto(buf)
        except BlockingIOError:
            # A non-blocking source has nothing for now: what was read is returned, as RawIOBase.readall
            # does (raising would lose it: the stream has moved past it); only a read that got nothing raises.
            if out:
                break
            raise
        if not n:
            break
        out += memoryview(buf)[:n]
        if n == len(buf) < _READ_SIZE:
            buf = bytearray(min(2 * n, _READ_SIZE))
    return bytes(out)


def _read_known(readinto: Callable[[Buffer], int | None], left: int) -> bytes:
    """The `left` bytes a stream's readinto gives, read into a new result, or what it gave if it ended sooner."""
    got = 0

    def fill(view: memoryview, ready: Callable[[int], bool]) -> None:
        nonlocal got
        while got < len(view):
            end = min(got + _KNOWN_STEP, len(view))
            ready(end)
            try:
                n = readinto(view[got:end])
            except BlockingIOError:
                if not got:
                    raise
                n = 0   # as read_all: what was read is returned
            if not n:
                # The source ended sooner than it said (a file cut short under the stream), or has nothing for
                # now: the rest is zeroed, never left as it was, and only what was read is returned.
                ready(len(view))
                view[got:] = bytes(len(view) - got)
                return
            got += n

    result = new_bytes(left, fill)
    return result if got == left else result[:got]


def _is_seekable(src: object) -> bool:
    seekable = getattr(src, "seekable", None)
    return seekable is not None and bool(seekable())


class Decryptor(OpenStream, io.RawIOBase):
    """A readable binary stream of the plaintext of `src`.

    `armored` says what the caller knows of the file: True for ASCII armor
    (anything before the BEGIN line other than whitespace is an ArmorError),
    False for a binary file, None (the default) to tell from its first bytes.

    The header is read and checked on construction. Plaintext is released only
    chunk by chunk after each chunk's tag verified; after a failure every
    further read raises the same error.

    Over a seekable, unarmored source the stream is seekable too: the final
    chunk is authenticated on construction, and seek/tell/pread work anywhere.
    There a damaged chunk fails the reads that reach it, and no other.

    Reads, seeks and tells from several threads take turns, as on a Python
    file; pread needs no turn.

    A non-blocking source must have the header ready when the decryptor is
    made; after that a read that finds nothing raises BlockingIOError, and
    retrying it later carries on where it stopped.
    """

    _what = "decryptor"

    def __init__(self, src: Reader, identities: Iterable[Identity], *, armored: bool | None = None,
                 close_src: bool = False, threads: int | None = None) -> None:
        super().__init__()
        try:
            self._src = _arguments.reader("src", src)
            self._close_src = close_src
            start: int | None = getattr(src, "tell")() if _is_seekable(src) else None
            source, key, armored = open_file(src, identities, armored)
            self._payload: SeekablePayload | PayloadReader
            if start is not None and not armored:
                self._payload = SeekablePayload(src, start + source.consumed, key, choose(None, threads))
            else:
                self._payload = PayloadReader(source, key, choose(None, threads))
            # One reader at a time moves the position and fills the payload's buffers: two at once had read
            # into one buffer together, and got misplaced plaintext or a false PayloadError.
            self._turn = threading.Lock()
        except BaseException:
            # Refused: closed here (`src` stays the caller's), as IOBase's
            # finaliser would close it with nothing set up.
            super().close()
            raise

    def readable(self) -> bool:
        self._check_open()
        return True

    def seekable(self) -> bool:
        self._check_open()
        return isinstance(self._payload, SeekablePayload)

    def write(self, b: Buffer) -> int:
        raise io.UnsupportedOperation("a decryptor is read, not written")

    def _seekable_payload(self) -> SeekablePayload:
        self._check_open()
        if not isinstance(self._payload, SeekablePayload):
            raise io.UnsupportedOperation("the source is not seekable (or is armored)")
        return self._payload

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move to `offset` (from the start, the position or the end, by `whence`); returns the new position.

        Seekable decryptors only (io.UnsupportedOperation otherwise); a position
        past the end reads nothing."""
        payload = self._seekable_payload()
        with self._turn:
            return payload.seek(offset, whence)

    def tell(self) -> int:
        """The position in the plaintext (seekable decryptors only)."""
        payload = self._seekable_payload()
        with self._turn:
            return payload.pos

    def pread(self, offset: int, size: int) -> bytes:
        """Thread-safe positional read; does not move the stream position."""
        return self._seekable_payload().pread(offset, size)

    def read(self, size: int | None = -1, /) -> bytes | None:
        """At most `size` bytes (all the rest if negative or None); b"" at the end."""
        size = -1 if size is None else size
        if size > 0 and isinstance(self._payload, SeekablePayload):
            # RawIOBase.read makes a buffer of `size` first: a read(2**62) of a small file was a MemoryError.
            size = min(size, self._payload.left())
        return super().read(size)

    def readinto(self, b: Buffer) -> int:
        """Fill the writable buffer `b` with verified plaintext; returns the count, 0 at the end."""
        if self.closed:
            raise ValueError("read from a closed decryptor")
        # Refused before the source is read: a non-seekable one's chunks, taken and then not released, were lost.
        view = _arguments.writable_buffer("b", b)
        with self._turn:
            return self._payload.readinto(view)

    def peek(self, size: int = 0, /) -> bytes:
        """Verified plaintext from the position on, without moving it, as BufferedReader.peek: at least a byte
        unless at the end, and up to 8 KiB, whatever `size` asks.

        IOBase.readline (and so iterating over lines) reads up to the next
        newline in what peek gives, where it read a byte a call without it
        (a MB of short lines: 2 s).
        """
        if self.closed:
            raise ValueError("peek of a closed decryptor")
        with self._turn:
            return self._payload.peek()

    def readall(self) -> bytes:
        """All the rest of the plaintext."""
        if self.closed:
            raise ValueError("read from a closed decryptor")
        # One turn for the whole read, as a Python file's: a seek from another thread between its steps had
        # spliced the plaintext of two places into one result.
        with self._turn:
            payload = self._payload
            return read_all(payload.readinto, payload.left() if isinstance(payload, SeekablePayload) else None)

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
    `src` with the stream (where this raises, `src` stays open)."""
    return Decryptor(src, identities, armored=armored, close_src=close_src, threads=threads)


def write_position(writer: object) -> int | None:
    position = file_position(writer)
    return None if position is None else position[0]
