"""The fsspec filesystem `age`: age files on any other fsspec filesystem.

Chained in front of another filesystem as fsspec's own wrappers are
(`simplecache::`, `blockcache::`): `age::file:///data/x.parquet.age`,
`age::s3://bucket/x.age`, `age::http://host/x.age`, with the options given
under the protocol's name, `age={"identity_file": "key.txt"}`. fsspec finds it
through the `fsspec.specs` entry point, so users never import this module.

Reading is random access: opening reads the header and authenticates the final
chunk (so the plaintext size is trusted), and each read then fetches, with one
ranged read of the wrapped file per run of chunks, only the sealed chunks its
bytes live in. Listings report plaintext sizes, computed from the ciphertext
size and the header's length: one small ranged read of each file's header,
remembered per file. Writing streams through agefast's encryptor.

This module is the only one that imports fsspec, which comes with the `data`
extra.
"""

import io
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import fsspec
from fsspec.implementations.chained import ChainedFileSystem
from fsspec.spec import AbstractBufferedFile, make_instance

from . import keys, streaming
from .io.buffers import new_bytes, ready_now
from .io.source import Source
from ._typing import Buffer
from .payload.rules import CHUNK_SIZE, DIRECT_CHUNKS, NONCE_SIZE, plaintext_size
from .errors import HeaderError, IdentityError, PayloadError, RecipientError
from .format.grammar import parse_header

# Chunks whose plaintext an open file keeps, for reads that start or end
# inside a chunk: the next read usually begins in the same chunk (a parquet
# reader reads the footer's tail, then the footer; a CSV reader reads on).
CACHED_CHUNKS = 8
# Whole chunks a large read opens into its result between two waits for the
# result's pages (agefast.io.buffers faults them in from another thread): the
# seekable decryptor's largest batch.
_STEP = DIRECT_CHUNKS * CHUNK_SIZE


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _parsed(values: Any, needs: str, parse: Callable[[str], list[Any]]) -> list[Any]:
    """Key objects as given; strings (one key a line, or any object without
    `needs`, such as pyrage's key objects, through str()) parsed by agefast."""
    out: list[Any] = []
    for value in _as_list(values):
        if hasattr(value, needs):
            out.append(value)
        else:
            out.extend(parse(str(value)))
    return out


def _portable(key: Any) -> Any:
    """What a key travels as in a pickle: native age key strings (X25519 and
    post-quantum; their objects hold keys that do not pickle) as strings,
    anything else as itself."""
    if isinstance(key, str):
        return key
    text = str(key)
    return text if text.startswith(("AGE-SECRET-KEY-", "age1")) else key


def _read_key_file(path: str | os.PathLike[str]) -> bytes:
    with open(os.path.expanduser(os.fspath(path)), "rb") as f:
        return f.read()


class _HeadReader:
    """Reads a file from its start by ranged reads, as the header parser asks
    (4 KiB at a time: one read for any header of a few recipients)."""

    def __init__(self, target: Any, path: str, size: int) -> None:
        self._target = target
        self._path = path
        self._size = size
        self._pos = 0

    def readinto(self, b: memoryview) -> int:
        end = min(self._pos + len(b), self._size)
        if end <= self._pos:
            return 0
        data: bytes = self._target.cat_file(self._path, start=self._pos, end=end)
        b[:len(data)] = data
        self._pos += len(data)
        return len(data)


class AgeFileSystem(ChainedFileSystem):
    """age files on the filesystem `fs` (or one made from `target_protocol`
    and `target_options`).

    identities: identity objects or key strings, for reading. Pickled (as Dask
    does to send the filesystem to its workers) they carry the secret keys.
    identity_file: a path or a list of paths of identity files, read when the
    first file is opened for reading, in the process that opens it: on a
    cluster the workers read their own copy and no key enters the task graph.
    recipients, recipients_file: the same for writing (recipient objects or
    strings; recipients files as age's -R takes them).
    threads: passed to agefast's decryptor and encryptor.
    """

    protocol = "age"
    # The chained URL's inner path arrives as `fo`; it names a file, not the filesystem.
    _strip_tokenize_options = ("fo",)

    def __init__(self, target_protocol: str | None = None, target_options: dict[str, Any] | None = None,
                 fs: Any = None, identities: Any = None, identity_file: Any = None, recipients: Any = None,
                 recipients_file: Any = None, threads: int | None = None, fo: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if (fs is None) == (target_protocol is None):
            raise ValueError("give the filesystem holding the age files as fs= or as target_protocol=, one of them")
        self.fs = fs if fs is not None else fsspec.filesystem(target_protocol, **(target_options or {}))
        self.threads = threads
        self._identities = _parsed(identities, "unwrap", keys.parse_identities)
        self._identity_files = _as_list(identity_file)
        self._recipients = _parsed(recipients, "wrap", keys.parse_recipients)
        self._recipients_files = _as_list(recipients_file)
        self._loaded_identities: list[Any] | None = None
        self._loaded_recipients: list[Any] | None = None
        self._lock = threading.Lock()
        self._header_sizes: dict[tuple[Any, ...], int] = {}

        def _strip_protocol(path: str) -> str:
            # As CachingFileSystem: each instance strips as its target does.
            # (the class's, which this instance's shadows)
            stripped: str = self.fs._strip_protocol(type(self)._strip_protocol(path))  # type: ignore[misc]
            return stripped

        self._strip_protocol = _strip_protocol

    def __reduce__(self) -> tuple[Any, ...]:
        options = dict(self.storage_options)
        for name in ("identities", "recipients"):
            if name in options:
                options[name] = [_portable(key) for key in _as_list(options[name])]
        return make_instance, (type(self), self.storage_args, options)

    def unstrip_protocol(self, name: str) -> str:
        # `age://` and the wrapped filesystem's own path, which this
        # instance's _strip_protocol turns back into that path: the form an
        # engine holding this instance (DuckDB's register_filesystem) hands
        # back to open, and the only one it recognises as this filesystem's.
        # A chained URL (`age::file://...`) names a filesystem to build, not
        # this one, and engines dispatching by protocol do not route it here.
        return f"age://{name}"

    # Keys

    def identities(self) -> list[Any]:
        """The identities to read with, identity files loaded at the first call."""
        with self._lock:
            if self._loaded_identities is None:
                found = list(self._identities)
                for path in self._identity_files:
                    found += keys.load_identities(_read_key_file(path), name=os.fspath(path))
                if not found:
                    raise IdentityError("reading age files needs identities or identity_file in the age options")
                self._loaded_identities = found
            return self._loaded_identities

    def recipients(self) -> list[Any]:
        """The recipients to write to, recipients files loaded at the first call."""
        with self._lock:
            if self._loaded_recipients is None:
                found = list(self._recipients)
                for path in self._recipients_files:
                    found += keys.parse_recipients(_read_key_file(path).decode("utf-8"))
                if not found:
                    raise RecipientError("writing age files needs recipients or recipients_file in the age options")
                self._loaded_recipients = found
            return self._loaded_recipients

    # Sizes

    def _header_size(self, path: str, size: int) -> int:
        """Bytes before the first chunk: the header and the payload nonce."""
        source = Source(_HeadReader(self.fs, path, size))
        try:
            parse_header(source)
        except HeaderError as e:
            raise HeaderError(f"{path}: {e}") from None
        return source.consumed + NONCE_SIZE

    def _plain_info(self, info: dict[str, Any]) -> dict[str, Any]:
        """`info` of a wrapped file, with the plaintext size of the age file."""
        if info.get("type") != "file":
            return info
        if info.get("size") is None:  # http:// listings of HTML pages give no sizes
            info = {**info, "size": self.fs.size(info["name"])}
        stamp = (info["name"], info["size"], info.get("mtime"), info.get("ETag"))
        header = self._header_sizes.get(stamp)
        if header is None:
            header = self._header_sizes[stamp] = self._header_size(info["name"], info["size"])
        return {**info, "size": plaintext_size(info["size"] - header)}

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        return self._plain_info(self.fs.info(self._strip_protocol(path), **kwargs))

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        entries = self.fs.ls(self._strip_protocol(path), detail=True, **kwargs)
        if not detail:
            return [entry["name"] for entry in entries]
        return [self._plain_info(entry) for entry in entries]

    def _plain_listing(self, found: Any) -> Any:
        if isinstance(found, dict):
            return {name: self._plain_info(info) for name, info in found.items()}
        return found

    def find(self, path: str, maxdepth: int | None = None, withdirs: bool = False, detail: bool = False,
             **kwargs: Any) -> Any:
        found = self.fs.find(self._strip_protocol(path), maxdepth=maxdepth, withdirs=withdirs, detail=detail,
                             **kwargs)
        return self._plain_listing(found)

    def glob(self, path: str, maxdepth: int | None = None, **kwargs: Any) -> Any:
        # The wrapped filesystem globs; only the matches' headers are read.
        return self._plain_listing(self.fs.glob(self._strip_protocol(path), maxdepth=maxdepth, **kwargs))

    def invalidate_cache(self, path: str | None = None) -> None:
        self._header_sizes.clear()
        self.fs.invalidate_cache(None if path is None else self._strip_protocol(path))

    # What needs no decryption goes straight to the wrapped filesystem.

    def exists(self, path: str, **kwargs: Any) -> bool:
        return bool(self.fs.exists(self._strip_protocol(path), **kwargs))

    def isdir(self, path: str) -> bool:
        return bool(self.fs.isdir(self._strip_protocol(path)))

    def isfile(self, path: str) -> bool:
        return bool(self.fs.isfile(self._strip_protocol(path)))

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> Any:
        return self.fs.mkdir(self._strip_protocol(path), create_parents=create_parents, **kwargs)

    def makedirs(self, path: str, exist_ok: bool = False) -> Any:
        return self.fs.makedirs(self._strip_protocol(path), exist_ok=exist_ok)

    def rmdir(self, path: str) -> Any:
        return self.fs.rmdir(self._strip_protocol(path))

    def rm_file(self, path: str) -> Any:
        self.invalidate_cache(path)
        return self.fs.rm_file(self._strip_protocol(path))

    def rm(self, path: str, recursive: bool = False, maxdepth: int | None = None) -> Any:
        self.invalidate_cache(path)
        return self.fs.rm(self._strip_protocol(path), recursive=recursive, maxdepth=maxdepth)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> Any:
        # The copy is the same age file, readable with the same identities.
        return self.fs.cp_file(self._strip_protocol(path1), self._strip_protocol(path2), **kwargs)

    def modified(self, path: str) -> Any:
        return self.fs.modified(self._strip_protocol(path))

    def _open(self, path: str, mode: str = "rb", block_size: int | None = None, autocommit: bool = True,
              cache_options: dict[str, Any] | None = None, **kwargs: Any) -> "AgeReadFile | AgeWriteFile":
        if mode == "rb":
            return AgeReadFile(self, path, block_size=block_size, cache_options=cache_options, **kwargs)
        if mode in ("wb", "xb"):
            return AgeWriteFile(self, path, mode, block_size=block_size, **kwargs)
        raise ValueError(f"mode {mode!r}: age files are read (rb) or written whole (wb, xb)")


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

    def __init__(self, fs: AgeFileSystem, path: str, block_size: int | None = None, cache_type: str = "none",
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
                raise ValueError(f"{path} is armored: armored age files have no random access; "
                                 "decrypt them whole with agefast.decrypt")
        except BaseException:
            self._raw.close()
            raise
        self._chunks: dict[int, bytes] = {}  # chunk index -> verified plaintext, oldest first
        self._streaming = True  # until the decryptor's stream failed, for good
        self._lock = threading.Lock()
        super().__init__(fs, path, "rb", block_size=block_size, cache_type="none",
                         size=self._payload.seek(0, io.SEEK_END), **kwargs)

    def readinto(self, b: Buffer) -> int:
        # Straight into the caller's buffer; fsspec's readinto reads into a
        # new bytes object and copies that.
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        view = memoryview(b).cast("B")
        start: int = self.loc
        end: int = min(start + len(view), self.size)
        if start >= end:
            return 0
        with self._lock:
            self._fill(view[:end - start], ready_now, start)
        self.loc = end
        return end - start

    def _fetch_range(self, start: int, end: int) -> bytes:
        end = min(end, self.size)
        if start >= end:
            return b""
        index, skip = divmod(start, CHUNK_SIZE)
        with self._lock:
            if end <= (index + 1) * CHUNK_SIZE:  # within one chunk
                return self._chunk(index)[skip:skip + end - start]
            return new_bytes(end - start, lambda view, ready: self._fill(view, ready, start))

    def _fill(self, view: memoryview, ready: Callable[[int], None], start: int) -> None:
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


class AgeWriteFile(streaming.AbortOnError, AbstractBufferedFile):
    """Writes an age file through agefast's encryptor onto the wrapped filesystem.

    close() seals the final chunk. A close while an exception is being
    handled (leaving a `with` block through an exception, fsspec.open's
    included, or an except or finally clause during one) does not, nor does
    the garbage collector: an interrupted file fails to decrypt instead of
    looking complete.
    """

    def __init__(self, fs: AgeFileSystem, path: str, mode: str = "wb", block_size: int | None = None,
                 **kwargs: Any) -> None:
        recipients = fs.recipients()
        self._raw = fs.fs.open(path, mode)
        try:
            self._encryptor = streaming.encryptor(self._raw, recipients, threads=fs.threads)
        except BaseException:
            self._raw.close()
            raise
        super().__init__(fs, path, mode, block_size=block_size, **kwargs)

    def write(self, data: Buffer) -> int:
        # Straight to the encryptor, which gathers a batch of chunks of its
        # own: AbstractBufferedFile's buffer in front of it would only copy.
        if not self.writable():
            raise ValueError("write to a closed age file")
        n = self._encryptor.write(data)
        self.loc += n
        return n

    def _upload_chunk(self, final: bool = False) -> bool:
        # Called by close() (through flush(force=True)); the buffer stays empty.
        if final:
            self._encryptor.close()
            self._raw.close()
        return True

    def abort(self) -> None:
        """Stop without sealing the final chunk: the file will not decrypt."""
        if self.closed:
            return
        self._encryptor.abort()
        self._raw.close()
        self.closed: bool = True
        self.fs.invalidate_cache(self.path)

    def close(self) -> None:
        if sys.exc_info()[1] is not None:
            self.abort()
        else:
            super().close()

