"""Where a tree's files are: a local folder, or a folder of an fsspec filesystem (s3://, gs://, ...).

A tree job reads, writes and lists files only through these two, so the
rest of it is the same for both. The local folder is what agefast-tree has
always done: outputs renamed into place whole (agefast.io.replace), a
manifest the workers append to. An fsspec store writes small outputs with
one put (an object appears only when whole) and streams large ones through
an upload that is committed only at the end and discarded on failure; an
object store cannot append, so its manifest is one object the job's own
process rewrites (agefast.tree.manifest.Rewriter).

A file's stamp is what says it changed: its modification time in
nanoseconds on a local disk, its ETag (or, where a store has none, its
modification time as the store gives it) on an fsspec store.

A failure of an fsspec store that its library raises as an error of its own
(botocore's: no credentials, no connection, a bad endpoint) is a StoreError,
an OSError naming the store: like any OSError, it fails the file being done,
or ends the job where it came from the roots (listing the source, making
the destination, its manifest).
"""

import contextlib
import datetime
import errno
import io
import os
import stat
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, NamedTuple

from .. import _arguments
from ..io import uploads
from ..io.replace import Folder
from ..io.writes import write_all
from . import manifest, s3copy
from .walk import MANIFEST_NAME, Found, Passed, Unlisted, below, walk

# An output's size and stamp, as the manifest records them.
Stat = tuple[int, Any]
# What makes an output: its bytes, or a function that writes them onto a writer.
Content = bytes | Callable[[Any], None]


# A local tree's files are opened part by part below the root, each part relative to the folder before it and
# without following a symbolic link (the root itself, which the user named, is followed). The walk never follows
# one (agefast.tree.walk), and neither may a read or a write: a link in DST, or one put in SRC after the walk,
# would otherwise take a job's outputs, or its inputs, out of its tree (onto an identity file, say).
_FOLDER = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# O_NONBLOCK: a FIFO put in a file's place after the walk must fail the file, not block the worker on open.
_FILE = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def _not_followed(path: bytes) -> OSError:
    return OSError(errno.ELOOP, "a symbolic link, not followed", os.fsdecode(path))


def _refused(folder: int, part: bytes, error: OSError, path: bytes) -> OSError:
    """What to raise where os.open(part, ... | O_NOFOLLOW) in the open folder `folder` failed with `error`: a link as
    not followed, anything else as `error` naming `path`, the whole."""
    # What O_NOFOLLOW says of a link varies (ELOOP; ENOTDIR with O_DIRECTORY on Linux; EMLINK on FreeBSD): the
    # entry is asked instead.
    try:
        link = stat.S_ISLNK(os.stat(part, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        link = False
    return _not_followed(path) if link else type(error)(error.errno, error.strerror, os.fsdecode(path))


def _open_folder(root: bytes, folder: bytes, make: bool) -> int:
    """The folder `folder` under `root` (b"" for the root itself), open; with `make`, its missing parts are made."""
    fd = os.open(root, _FOLDER)
    if not folder:
        return fd
    parts = folder.split(b"/")
    try:
        for i, part in enumerate(parts):
            try:
                inner = os.open(part, _FOLDER | _NOFOLLOW, dir_fd=fd)
            except OSError as e:
                path = os.path.join(root, *parts[:i + 1])
                if not (make and isinstance(e, FileNotFoundError)):
                    raise _refused(fd, part, e, path) from None
                with contextlib.suppress(FileExistsError):    # another worker made it first
                    os.mkdir(part, dir_fd=fd)
                try:
                    inner = os.open(part, _FOLDER | _NOFOLLOW, dir_fd=fd)
                except OSError as again:
                    raise _refused(fd, part, again, path) from None
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _checked_path(root: bytes, path: bytes) -> bytes:
    """root/path where files cannot be opened relative to a folder (Windows): each part below the root looked at
    first, which a link made between the look and the open escapes."""
    whole = root
    for part in path.split(b"/"):
        whole = os.path.join(whole, part)
        if os.path.islink(whole):
            raise _not_followed(whole)
    return whole


class Local(NamedTuple):
    """A folder on this machine's file system, by its absolute path; `kept`, the files (device and inode) that no
    output written here may replace, whatever its name: the job's key files; `sources`, the folders (device and
    inode) no output may be written into: the source tree's, which a bind mount may also show below this one."""

    root: bytes
    kept: frozenset[tuple[int, int]] = frozenset()
    sources: frozenset[tuple[int, int]] = frozenset()

    @property
    def stamp_key(self) -> str:
        """The manifest's name for a file's stamp here: its modification time in nanoseconds."""
        return "mtime_ns"

    def __str__(self) -> str:
        return os.fsdecode(self.root)

    def is_folder(self) -> bool:
        return os.path.isdir(self.root)

    @property
    def in_this_process(self) -> bool:
        return False

    def below(self, other: "Store") -> bytes | None:
        """Where the folder `other` lies under this one (b"" for this one itself), None if it does not."""
        if isinstance(other, Remote) and other.target in _LOCAL:    # simplecache::file:///... is a local folder too
            return below(os.fsencode(other.root), self.root)
        return below(other.root, self.root) if isinstance(other, Local) else None

    def walk(self, folders: set[tuple[int, int]] | None = None) -> Iterator[Found | Passed | Unlisted]:
        """Its files (agefast.tree.walk); into `folders`, the device and inode of every folder listed."""
        return walk(self.root, folders)

    def stats(self) -> Callable[[bytes], Stat | None]:
        """The size and stamp of the file at a path under the root, None if there is none."""
        def stat(path: bytes) -> Stat | None:
            try:
                st = os.stat(os.path.join(self.root, path), follow_symlinks=False)
            except OSError:
                return None
            return st.st_size, st.st_mtime_ns
        return stat

    def read(self, path: bytes) -> bytes:
        with self.open(path) as f:
            return f.read()

    def open(self, path: bytes) -> BinaryIO:
        """The regular file at `path` under the root, open for reading; no symbolic link on the way is followed."""
        whole = os.path.join(self.root, path)
        if os.open not in os.supports_dir_fd:
            fd = os.open(_checked_path(self.root, path), _FILE | _NOFOLLOW)
        else:
            folder_path, name = os.path.split(path)
            folder = _open_folder(self.root, folder_path, make=False)
            try:
                fd = os.open(name, _FILE | _NOFOLLOW, dir_fd=folder)
            except OSError as e:
                raise _refused(folder, name, e, whole) from None
            finally:
                os.close(folder)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file", os.fsdecode(whole))
        except BaseException:
            os.close(fd)
            raise
        return open(fd, "rb")

    def put(self, path: bytes, content: Content, named: Callable[[Stat], None], durable: bool = False) -> None:
        """Write the output at `path`; `named` gets its size and stamp once it is whole, before it takes its name.
        Its folders are made where missing; no symbolic link on the way is followed. A file it replaces is treated
        as agefast.io.replace treats one (`durable`: the output synced before it replaces one)."""
        folder, name = os.path.split(path)
        if os.open not in os.supports_dir_fd:
            whole = _checked_path(self.root, folder) if folder else self.root
            os.makedirs(whole, exist_ok=True)
            into, fd = Folder(whole), None
        else:
            fd = _open_folder(self.root, folder, make=True)
            into = Folder(os.path.join(self.root, folder), fd)
        with into:
            if self.sources:
                self._refuse_source(fd, os.path.join(self.root, folder))
            if self.kept:
                self._refuse_kept(fd, path, name)
            with into.replacing(name, durable) as dst:
                if isinstance(content, bytes):
                    write_all(dst, content)
                else:
                    content(dst)
                if durable:
                    # Synced before `named` checks the input (in place): a write to it during a long sync would
                    # otherwise be lost by the rename (replacing()'s own sync then has nothing left to do).
                    dst.flush()
                    os.fsync(dst.fileno())
                st = os.fstat(dst.fileno())
                # The rename keeps both, so the manifest line is true of the named output.
                named((st.st_size, st.st_mtime_ns))

    def _refuse_source(self, folder: int | None, whole: bytes) -> None:
        """OSError where the output's folder (open as `folder`, else at `whole`) is a folder of the source tree,
        met here through a bind mount: an output written there could replace an input."""
        st = os.stat(whole) if folder is None else os.fstat(folder)
        if (st.st_dev, st.st_ino) in self.sources:
            raise OSError(errno.EPERM, "a folder of the source tree (a bind mount shows it here), where an output "
                          "could replace an input: not written", os.fsdecode(whole))

    def _refuse_kept(self, folder: int | None, path: bytes, name: bytes) -> None:
        """OSError where the output `path`'s name (`name` in its folder, open as `folder` where files can be opened
        relative to one) holds a kept file: replacing it would lose the key the files need."""
        whole = os.path.join(self.root, path)
        try:
            if folder is None:
                st = os.stat(whole, follow_symlinks=False)
            else:
                st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return
        if (st.st_dev, st.st_ino) in self.kept:
            raise OSError(errno.EPERM, "a key file of this job, not replaced", os.fsdecode(whole))

    def make(self) -> None:
        os.makedirs(self.root, exist_ok=True)

    def load_manifest(self) -> bytes:
        try:
            fd = manifest.open_local(os.path.join(self.root, MANIFEST_NAME), os.O_RDONLY, self.kept)
        except FileNotFoundError:
            return b""
        with open(fd, "rb") as f:
            return f.read()

    def manifest(self) -> "manifest.Appender":
        return manifest.Appender(os.path.join(self.root, MANIFEST_NAME), self.kept)


class StoreError(OSError):
    """An fsspec store failed with an error of its library's own: the store's URL, the error's type and message."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


# The errno of an OSError subclass that s3fs makes from a message alone (others, as BlockingIOError, take other
# arguments: they are left as they are).
_ERRNO = {PermissionError: errno.EACCES, FileNotFoundError: errno.ENOENT, FileExistsError: errno.EEXIST}


def _calling(url: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """call(*args, **kwargs), a call into the fsspec store at `url`; an error of the store's library other than an
    OSError becomes a StoreError.

    fsspec's convention is OSError (FileNotFoundError, PermissionError,
    ...), which s3fs follows for what S3 answers; but an error that is not
    an answer passes through as its library's own: botocore's
    NoCredentialsError and EndpointConnectionError, its ValueError for a
    malformed endpoint, aiobotocore's TypeError for an unknown storage
    option, and gcsfs, adlfs and the rest have theirs, with no common base.
    So the one test that holds for every store is where the error came
    from: a call into the store runs only the store's code, and whatever
    it raises there is the store failing, or refusing its settings. OSError
    keeps its type (its subclasses are what callers tell apart, as
    FileNotFoundError here), and where it names no file it is told again
    naming the store; what is not an Exception (KeyboardInterrupt, a
    signal's) still unwinds the job. The price: a wrong call of agefast's
    own would read as the store failing, its type and message kept (and
    chained as the cause). StoreError keeps OSError's constructor, so it
    pickles (a worker's error reaches the job's process).
    """
    try:
        return call(*args, **kwargs)
    except OSError as e:
        if e.filename is not None or not (type(e) is OSError or type(e) in _ERRNO):
            raise
        # s3fs's errors for what S3 answered name no file: PermissionError("The provided token has expired.")
        # for a 403, FileNotFoundError(key); the store is named, the message and type kept
        said = e.strerror if e.errno is not None and e.strerror is not None else str(e) or type(e).__name__
        raise type(e)(e.errno or _ERRNO.get(type(e), errno.EIO), said, url) from e
    except Exception as e:
        said = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise StoreError(errno.EIO, said, url) from e


class _Guarded:
    """An fsspec filesystem, or a file it opened, whose every method is called through _calling(): agefast calls
    the store only through these. The files too: the payload engine reads and writes a large file through its
    file object, where s3fs's ranged reads and part uploads raise botocore's errors as they are."""

    def __init__(self, target: Any, url: str) -> None:
        self._target, self._url = target, url

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value

        def guarded(*args: Any, **kwargs: Any) -> Any:
            result = _calling(self._url, value, *args, **kwargs)
            return _Guarded(result, self._url) if name == "open" else result
        return guarded

    def __enter__(self) -> "_Guarded":
        return self

    def __exit__(self, *exc: object) -> None:
        _calling(self._url, self._target.__exit__, *exc)


class _Noted:
    """A file written through, noting how many bytes it was given and the first of them (s3copy.holds)."""

    _START = 4096     # the new header's first bytes: no other writer's object begins with them

    def __init__(self, f: Any) -> None:
        self._f, self.size, self.start = f, 0, b""

    def write(self, data: Any) -> Any:
        n = self._f.write(data)
        if n:
            if len(self.start) < self._START:
                self.start += bytes(memoryview(data).cast("B")[:min(n, self._START - len(self.start))])
            self.size += n
        return n

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


# fsspec's protocols for this machine's own files
_LOCAL = ("file", "local")


class Remote(NamedTuple):
    """A folder of an fsspec filesystem: its path there (no protocol), the protocol and the storage options.

    The filesystem itself is not kept: each process (a forked worker, a
    Dask worker) makes its own from the protocol and options, as fsspec
    caches them per process; an async filesystem's event loop does not
    survive a fork.
    """

    root: str
    protocol: str
    options: dict[str, Any]

    @property
    def stamp_key(self) -> str:
        """The manifest's name for a file's stamp here: its ETag, or the store's modification time."""
        return "stamp"

    def __str__(self) -> str:
        return f"{self.protocol}://{self.root}"

    @property
    def fs(self) -> Any:
        """The filesystem, its failures StoreErrors (_calling)."""
        import fsspec

        return _Guarded(_calling(str(self), fsspec.filesystem, self.protocol, **self.options), str(self))

    def key(self, path: bytes) -> str:
        name = os.fsdecode(path)
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            # S3's and GCS's keys are UTF-8: such a file fails alone.
            raise OSError(errno.EILSEQ, "the name is not UTF-8, as an fsspec store's names must be", name) from None
        key = f"{self.root}/{name}"
        # s3fs reads "?versionId=" in any path as a version (gcsfs "#" as a generation): such a name would be
        # another object's, its output written over that one's. It fails alone.
        split = getattr(self.fs, "split_path", None)
        if split is not None:
            bucket, addressed = split(key)[:2]
            if f"{bucket}/{addressed}" != key:
                raise OSError(errno.EINVAL, f"{self.protocol}:// reads this name as another object's", name)
        return key

    def is_folder(self) -> bool:
        return bool(self.fs.isdir(self.root))

    @property
    def target(self) -> str:
        """The protocol of the filesystem its files are in: under fsspec's wrappers (simplecache::, blockcache::,
        which name what they wrap target_protocol), the innermost's."""
        protocol, options = self.protocol, self.options
        while isinstance(options.get("target_protocol"), str):
            protocol, options = options["target_protocol"], options.get("target_options") or {}
        return protocol

    @property
    def in_this_process(self) -> bool:
        """Whether its files are objects of this process (memory://, wrapped or not), which a forked worker or a
        cluster's would write into copies of, and write into as soon as they are opened."""
        return self.target == "memory"

    def same_store(self, other: "Store") -> bool:
        """Whether `other` is a folder of the same filesystem (protocol and options): one S3 endpoint and account."""
        return isinstance(other, Remote) and (other.protocol, other.options) == (self.protocol, self.options)

    def below(self, other: "Store") -> bytes | None:
        """Where the folder `other` lies under this one (b"" for this one itself), None if it does not: in the
        same filesystem, whatever wraps either (simplecache::s3://... is in s3://...)."""
        if self.target in _LOCAL:
            return Local(os.path.abspath(os.fsencode(self.root))).below(other)
        if not (isinstance(other, Remote) and other.target == self.target):
            return None
        if other.root == self.root:
            return b""
        return os.fsencode(other.root[len(self.root) + 1:]) if other.root.startswith(self.root + "/") else None

    def _listing(self) -> Iterator[tuple[bytes, dict[str, Any]]]:
        """Every file under the root, by its path under it, with the store's description of it; name order."""
        found = self.fs.find(self.root, detail=True, withdirs=False)
        start = len(self.root) + 1
        for name in sorted(found):
            info = found[name]
            # An empty object named "folder/" is a folder marker (the S3 console makes them), not a file.
            marker = name.endswith("/") and int(info.get("size", 0)) == 0
            if info.get("type", "file") == "file" and name.startswith(self.root + "/") and not marker:
                yield os.fsencode(name[start:]), info

    def walk(self, folders: set[tuple[int, int]] | None = None) -> Iterator[Found | Passed | Unlisted]:
        # An object store has no links and no special files: everything listed is a file.
        for path, info in self._listing():
            if path != MANIFEST_NAME:
                yield Found(path, int(info["size"]), stamp(info))

    def stats(self) -> Callable[[bytes], Stat | None]:
        # One listing for the whole tree, not a request per file.
        known = {path: (int(info["size"]), stamp(info)) for path, info in self._listing()}
        return known.get

    def read(self, path: bytes) -> bytes:
        return bytes(self.fs.cat_file(self.key(path)))

    def open(self, path: bytes) -> Any:
        return self.fs.open(self.key(path), "rb")

    def put(self, path: bytes, content: Content, named: Callable[[Stat], None], durable: bool = False,
            unchanged: str | None = None) -> None:
        """As Local.put; `unchanged`, the stamp the object replaced must still have (an in-place re-key): on S3 a
        conditional put, which fails where another writer replaced it meanwhile rather than drop what it wrote.
        An object is stored whole, as the store keeps it, when its put or its commit returns: `durable` asks
        nothing more."""
        fs, key = self.fs, self.key(path)
        # The ETag the object must still have, where the store has them (S3's).
        etag = unchanged if unchanged is not None and s3copy.is_s3(fs) else None
        if isinstance(content, bytes):
            if unchanged is not None and etag is None:
                # No conditional put here: the stamp is asked just before the put (a window of one request).
                _refuse_if_replaced(fs, key, unchanged)
            try:
                _made(fs, key, lambda: fs.pipe_file(key, content, **({} if etag is None else {"IfMatch": etag})))
            except OSError:
                if etag is None:
                    raise
                # The condition failed, or the put did, or the put was done and its answer lost, then retried
                # against what it had written: which, the object tells.
                if not s3copy.holds(fs, key, len(content), content):
                    _refuse_if_replaced(fs, key, etag)
                    raise
            named(self.written(path))
            return
        if self.in_this_process:
            # Written into as they are opened: one put when whole.
            whole = io.BytesIO()
            content(whole)
            self.put(path, whole.getvalue(), named, unchanged=unchanged)
            return
        # Written to the store only on commit(); until then an upload (S3's
        # multipart) or a temporary file, which discard() throws away.
        f = _made(fs, key, lambda: fs.open(key, "wb", autocommit=False))
        # In place on S3, what is written is noted: a commit whose answer was lost is retried by botocore and
        # fails against the upload it completed, and then the object tells whether it was made.
        out = _Noted(f) if etag is not None else f
        try:
            content(out)
            # A commit takes no condition (s3fs's neither): the stamp is asked just before it (a window of one
            # request).
            if unchanged is not None:
                _refuse_if_replaced(fs, key, unchanged)
            try:
                uploads.commit(f)
            except OSError:
                if not (isinstance(out, _Noted) and s3copy.holds(fs, key, out.size, out.start)):
                    raise
        except BaseException:
            uploads.discard(f)
            raise
        named(self.written(path))

    def refuse_if_replaced(self, path: bytes, unchanged: str) -> None:
        """EBUSY where the object at `path` no longer has the stamp `unchanged` it was read with."""
        _refuse_if_replaced(self.fs, self.key(path), unchanged)

    def written(self, path: bytes) -> Stat:
        """The size and stamp of an output just written (the store asked, not its cache)."""
        key = self.key(path)
        self.fs.invalidate_cache(key)
        info = self.fs.info(key)
        return int(info["size"]), stamp(info)

    def make(self) -> None:
        self.fs.makedirs(self.root, exist_ok=True)

    def load_manifest(self) -> bytes:
        try:
            return bytes(self.fs.cat_file(self.key(MANIFEST_NAME)))
        except FileNotFoundError:
            return b""

    def manifest(self) -> "manifest.Rewriter":
        return manifest.Rewriter(self.fs, self.key(MANIFEST_NAME), self.load_manifest())


Store = Local | Remote


def _made(fs: Any, key: str, put: Callable[[], Any]) -> Any:
    """put(), in a folder made first if it was missing: asked only then, as on S3 (no folders) asking costs a
    request per file, while a store with folders (SFTP, a mounted disk) needs them."""
    try:
        return put()
    except FileNotFoundError:
        fs.makedirs(key.rsplit("/", 1)[0], exist_ok=True)
        return put()


def _refuse_if_replaced(fs: Any, key: str, unchanged: str) -> None:
    """EBUSY where another writer replaced the object at `key` since it was read with the stamp `unchanged`
    (an in-place re-key): what they wrote is left as they wrote it."""
    fs.invalidate_cache(key)
    if stamp(fs.info(key)) != unchanged:
        raise OSError(errno.EBUSY, "the object changed while it was re-keyed: left as it is", key)


def stamp(info: dict[str, Any]) -> str | None:
    """What changes when an object is written again, from an fsspec info: its ETag, else its modification time
    (as seconds: a store may give a datetime in info() and a number in find(), as memory:// does)."""
    for key in ("ETag", "etag", "LastModified", "mtime", "last_modified", "updated", "created"):
        value = info.get(key)
        if value is not None:
            return repr(value.timestamp()) if isinstance(value, datetime.datetime) else str(value)
    return None


def _is_url(text: str) -> bool:
    """Whether `text` is an fsspec URL: PROTOCOL://..., or a chained URL whose first protocol fsspec knows
    (simplecache::s3://...); a local name that holds "::" (a::b) is a local name."""
    if "://" in text:
        return True
    protocol, chained, _ = text.partition("::")
    if not chained:
        return False
    try:
        from fsspec.registry import known_implementations, registry
    except ImportError:     # without fsspec no URL can be opened: a local name
        return False
    return protocol in known_implementations or protocol in registry


def store_at(name: str, value: Any, storage_options: dict[str, Any] | None) -> Store:
    """The store at a path or URL: a URL with a protocol other than "file" (s3://, gs://) is an fsspec store, with
    `storage_options` (or, for S3, what s3fs reads from the environment); the rest is a local folder."""
    path = _arguments.path(name, value)
    text = os.fsdecode(path)
    if _is_url(text):
        from fsspec.core import url_to_fs

        # A protocol unknown or whose library is missing is a StoreError too.
        fs, root = _calling(text, url_to_fs, text, **(storage_options or {}))
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        if protocol not in _LOCAL:
            return Remote(root.rstrip("/"), protocol, dict(fs.storage_options))
        path = root
    # Absolute: worker processes (a Dask cluster's) may start elsewhere.
    return Local(os.path.abspath(os.fsencode(path)))
