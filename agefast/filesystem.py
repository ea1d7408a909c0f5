"""The fsspec filesystem `age`: age files on any other fsspec filesystem.

Chained in front of another filesystem as fsspec's own wrappers are
(`simplecache::`, `blockcache::`): `age::file:///data/x.parquet.age`,
`age::s3://bucket/x.age`, `age::http://host/x.age`, with the options given
under the protocol's name, `age={"identity_file": "key.txt"}`. fsspec finds it
through the `fsspec.specs` entry point, so users never import this module.

Reading is random access: opening reads the header and authenticates the final
chunk (so the plaintext size is trusted), and each read then fetches, with one
ranged read of the wrapped file per run of chunks, only the sealed chunks its
bytes live in (the open files: agefast._filesystem_files). Listings report
plaintext sizes, computed from the ciphertext size and the header's length:
one small ranged read of each file's header, remembered per file. Writing
streams through agefast's encryptor.

This module and agefast._filesystem_files are the only ones that import
fsspec, which comes with the `data` extra.
"""

import errno
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

import fsspec
from fsspec.implementations.chained import ChainedFileSystem
from fsspec.callbacks import DEFAULT_CALLBACK
from fsspec.compression import compr
from fsspec.core import get_compression
from fsspec.implementations.local import LocalFileSystem, make_path_posix
from fsspec.spec import make_instance
from fsspec.utils import isfilelike

from . import _arguments, keys
from ._filesystem_files import CACHED_CHUNKS, AgeReadFile, AgeWriteFile, armored_error
from .io.replace import replacing
from .io.source import Source
from .payload.rules import NONCE_SIZE, plaintext_size
from .errors import HeaderError, IdentityError, RecipientError
from .format import armor
from .format.grammar import parse_header
from .header import ENDS_BEFORE_NONCE

__all__ = ["CACHED_CHUNKS", "AgeFileSystem", "AgeReadFile", "AgeWriteFile"]

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


def _read_key_file(path: str | os.PathLike[str], error: type[Exception]) -> bytes:
    with open(os.path.expanduser(os.fspath(path)), "rb") as f:
        return keys.read_key_file(f, os.fspath(path), error)


def _closing_inner(outer: Any, inner: Any) -> Any:
    """`outer` (a compressor over the age file `inner`), its close() closing `inner` after it, as fsspec.open's
    chain of files does.

    fsspec's open(compression=...) hands back the compressor alone, whose close leaves the file under it open:
    an age file is sealed by its own close, and one never closed is aborted when collected (AgeWriteFile), so a
    file written so was never written. A compressor collected unclosed (the finalizer's close, `_finalizing`)
    leaves `inner` to be aborted in turn. (`outer` is held weakly: a cycle through its own close would leave both
    to the collector, which finalizes them in no order.)
    """
    own = weakref.ref(outer)
    own_close = type(outer).close

    def close() -> None:
        compressor = own()
        try:
            if compressor is not None:
                own_close(compressor)
        finally:
            if compressor is not None and not getattr(compressor, "_finalizing", False):
                inner.close()

    try:
        outer.close = close
    except AttributeError:
        inner.close()
        raise ValueError(f"{type(outer).__name__} cannot close the age file under it: open it with fsspec.open, "
                         "whose file closes every layer") from None
    return outer


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


def _on_this_disk(fs: Any, path: str) -> str | None:
    """Where `path` of the filesystem `fs` lies on this machine's disk, through dir:: and the caches
    (simplecache::, filecache::, blockcache::, whose writes reach the filesystem they wrap), or None: the rules
    for key files and for a file read and written at once held only where the filesystem was file:// itself."""
    from fsspec.implementations.cached import CachingFileSystem
    from fsspec.implementations.dirfs import DirFileSystem

    while not isinstance(fs, LocalFileSystem):
        if isinstance(fs, DirFileSystem):
            path, fs = fs._join(path), fs.fs
        elif isinstance(fs, CachingFileSystem):
            fs = fs.fs
        else:
            return None
    on_disk: str = fs._strip_protocol(path)
    return on_disk


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
                    found += keys.load_identities(_read_key_file(path, IdentityError), name=os.fspath(path))
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
                    found += keys.parse_recipients(keys.key_text(_read_key_file(path, RecipientError)))
                if not found:
                    raise RecipientError("writing age files needs recipients or recipients_file in the age options")
                self._loaded_recipients = found
            return self._loaded_recipients

    def _refuse_key_file(self, path: str, local: bool = False) -> None:
        """PermissionError where `path` (the wrapped filesystem's, unless `local`: this machine's) is on this
        machine's disk one of the identity or recipients files: as agefast -o refuses them, a file written there
        would lose the key."""
        on_disk = path if local else _on_this_disk(self.fs, path)
        if on_disk is None:
            return
        try:
            st = os.stat(on_disk)
        except OSError:
            return
        for key in [*self._identity_files, *self._recipients_files]:
            try:
                kept = os.stat(os.path.expanduser(os.fspath(key)))
            except OSError:
                continue
            if os.path.samestat(kept, st):
                raise PermissionError(errno.EPERM, "a key file of this filesystem, not written over", path)

    # Sizes

    def _header_size(self, path: str, size: int) -> int:
        """Bytes before the first chunk: the header and the payload nonce."""
        source = Source(_HeadReader(self.fs, path, size))
        if armor.starts_armored(source):     # else parsed as a binary header: "not an age file"
            raise armored_error(path)
        try:
            parse_header(source)
        except HeaderError as e:
            raise HeaderError(f"{path}: {e}") from None
        if source.consumed + NONCE_SIZE > size:     # as opening it says (its size would be negative)
            raise HeaderError(f"{path}: {ENDS_BEFORE_NONCE}")
        return source.consumed + NONCE_SIZE

    def _plain_info(self, info: dict[str, Any]) -> dict[str, Any]:
        """`info` of a wrapped file, with the plaintext size of the age file."""
        if info.get("type") != "file":
            return info
        if info.get("size") is None:  # http:// listings of HTML pages give no sizes
            info = {**info, "size": self.fs.size(info["name"])}
        # The whole entry: stores name a file's version differently (mtime, ETag, etag, LastModified, created,
        # generation), and some name none, where a new header of the same ciphertext size is told only by its
        # other fields, or not at all.
        stamp = tuple(sorted((str(field), repr(value)) for field, value in info.items()))
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

    def _refuse_the_same_local_file(self, path: str, local_path: str) -> None:
        """SameFileError where the age file `path` and the plaintext `local_path` are one file of this machine's
        disk: writing one while reading the other loses it."""
        on_disk = _on_this_disk(self.fs, self._strip_protocol(path))
        if on_disk is not None:
            _arguments.distinct_paths(on_disk, local_path)

    def get_file(self, rpath: str, lpath: Any = None, callback: Any = DEFAULT_CALLBACK, outfile: Any = None,
                 **kwargs: Any) -> None:
        # The plaintext onto this machine's disk as agefast -d -o writes it: a new file that becomes lpath only
        # once whole, never over this filesystem's key file nor over the age file it decrypts. fsspec's opened
        # lpath first, truncating it: a key, or the input, was lost, and a failed decryption left it empty.
        if outfile is not None or isfilelike(lpath) or self.isdir(rpath):
            return super().get_file(rpath, lpath, callback, outfile, **kwargs)    # type: ignore[no-any-return]
        lpath = make_path_posix(lpath)
        self._refuse_key_file(lpath, local=True)
        self._refuse_the_same_local_file(rpath, lpath)
        os.makedirs(os.path.dirname(lpath) or ".", exist_ok=True)
        with self.open(rpath, "rb", **kwargs) as f1, replacing(lpath) as f2:
            callback.set_size(getattr(f1, "size", None))
            while data := f1.read(self.blocksize):
                f2.write(data)
                callback.relative_update(len(data))
        return None

    def put_file(self, lpath: str, rpath: str, callback: Any = DEFAULT_CALLBACK, mode: str = "overwrite",
                 **kwargs: Any) -> None:
        # Not onto the plaintext it reads (encrypt_file and agefast -o refuse it too): the input was replaced.
        if not os.path.isdir(lpath):
            self._refuse_the_same_local_file(rpath, make_path_posix(lpath))
        return super().put_file(lpath, rpath, callback, mode, **kwargs)    # type: ignore[no-any-return]

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> Any:
        # The copy is the same age file, readable with the same identities. (copy and mv come here too.)
        target = self._strip_protocol(path2)
        self._refuse_key_file(target)
        return self.fs.cp_file(self._strip_protocol(path1), target, **kwargs)

    def modified(self, path: str) -> Any:
        return self.fs.modified(self._strip_protocol(path))

    def open(self, path: str, mode: str = "rb", block_size: int | None = None,
             cache_options: dict[str, Any] | None = None, compression: str | None = None, **kwargs: Any) -> Any:
        if compression is None or "b" not in mode:     # a text mode comes back here in binary
            return super().open(path, mode, block_size=block_size, cache_options=cache_options,
                                compression=compression, **kwargs)
        inner = super().open(path, mode, block_size=block_size, cache_options=cache_options, **kwargs)
        codec = get_compression(self._strip_protocol(path), compression)
        if codec is None:
            return inner
        return _closing_inner(compr[codec](inner, mode=mode[0]), inner)

    def _open(self, path: str, mode: str = "rb", block_size: int | None = None, autocommit: bool = True,
              cache_options: dict[str, Any] | None = None, **kwargs: Any) -> "AgeReadFile | AgeWriteFile":
        if mode == "rb":
            return AgeReadFile(self, path, block_size=block_size, cache_options=cache_options, **kwargs)
        if mode in ("wb", "xb"):
            self._refuse_key_file(path)
            return AgeWriteFile(self, path, mode, block_size=block_size, autocommit=autocommit, **kwargs)
        raise ValueError(f"mode {mode!r}: age files are read (rb) or written whole (wb, xb)")
