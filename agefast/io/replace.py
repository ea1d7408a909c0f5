"""Writing a file whole or not at all: the output of `*_file` and of the
command's `-o` (but for an output that cannot be replaced so, which those
write in place as age and pyrage do: replacing's in_place_if_refused).

The result is written to a new file of its own, which takes the target's
name only when whole, so a failure half way (a corrupt chunk, a full disk)
never leaves a truncated or unauthenticated file, and an existing file
survives until the new one is whole.

On Linux the new file is created without a name (O_TMPFILE) in the target's
folder and linked there once written: the kernel frees a file without a name
when its last descriptor closes, so even SIGKILL, which no cleanup outlives,
leaves the old file or nothing. Elsewhere (another system, a file system
without O_TMPFILE, no /proc) it is named `.NAME.RANDOM.partial` until it is
renamed over the target, and removed on failure; a kill leaves it behind.

A symlink is written through, as a plain open() would: the file it points to
is replaced and the link stays. An existing file that is not a regular one
(a FIFO, a device) cannot be replaced by a rename, so it is written directly.
"""

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator
from typing import IO, TypeVar

from .._typing import Writer
from .direct import DirectWriter
from .writes import close

T = TypeVar("T")

# tempfile.mkstemp's way (O_EXCL, mode 0o600, a new random name on a clash),
# without importing tempfile: its imports (shutil, random and the compression
# modules) cost a fresh process ~5 ms, a tenth of a small file's command.
_ATTEMPTS = 100
_EXCLUSIVE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)

# linkat(2) names a file without a name through its descriptor here (its
# AT_EMPTY_PATH, the direct way, needs CAP_DAC_READ_SEARCH).
_PROC_FD = "/proc/self/fd"
# The longest file name (not path) Linux's file systems take, in bytes (NAME_MAX).
_NAME_MAX = 255
# How open(O_TMPFILE) says the folder's file system cannot make a file
# without a name (a kernel older than O_TMPFILE takes it for O_DIRECTORY and
# says EISDIR). Any other failure (no permission, no space, a read-only file
# system) would fail a named file too, and is the caller's.
_NO_UNNAMED = frozenset({errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL})
# How link(2) says the file system has no hard links (FAT's EPERM; FUSE's and SMB's ENOSYS or EOPNOTSUPP).
_NO_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS})


def _new_name(directory: str, name: str, create: Callable[[str], T], dir_fd: int | None = None) -> tuple[T, str]:
    """create(path) for the first path `.NAME.RANDOM.partial` in `directory`
    (relative to the folder `dir_fd`) that it finds free; create must raise
    FileExistsError where the name is taken, and create nothing then."""
    # NAME cut to leave room in a file name's 255 bytes for the 22 around it: a NAME of 234 bytes or more (a
    # name the file system takes) had every temporary name refused, so no such file could be replaced.
    stem = os.fsdecode(os.fsencode(name)[:_NAME_MAX - 22])
    for _ in range(_ATTEMPTS):
        tmp = os.path.join(directory, f".{stem}.{os.urandom(6).hex()}.partial")
        try:
            return create(tmp), tmp
        except FileExistsError:
            continue
        except OSError:
            raise    # nothing was created
        except BaseException:
            # A signal's exception (Ctrl-C, the command's SIGTERM / SIGHUP) is
            # raised as soon as the call returns, before its result reaches
            # the caller's cleanup: the file may exist, and is ours (its name
            # was free), so it goes. A descriptor closes as the process ends.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
    raise FileExistsError(errno.EEXIST, "no unused name for a temporary file", directory)


def create_partial(directory: str, name: str, dir_fd: int | None = None) -> tuple[int, str]:
    """A new file `.NAME.RANDOM.partial` in `directory` (relative to the folder `dir_fd`, if given), open for writing."""
    return _new_name(directory, name, lambda tmp: os.open(tmp, _EXCLUSIVE, 0o600, dir_fd=dir_fd), dir_fd)


class _Partial:
    """The result under a temporary name, renamed over the target when whole
    (names relative to the folder `dir_fd`, if given)."""

    def __init__(self, directory: str, name: str, dir_fd: int | None = None) -> None:
        self.fd, self._tmp = create_partial(directory, name, dir_fd)
        self._folder = dir_fd
        self._placed = False
        self._pid = os.getpid()     # a child forked meanwhile finalizes its copy: the name is the parent's

    def place(self, target: str, mode: int, exclusive: bool = False) -> None:
        os.chmod(self._tmp, mode, dir_fd=self._folder)
        if exclusive:
            try:
                # link(2) never replaces a name (FileExistsError); the temporary name then goes.
                os.link(self._tmp, target, src_dir_fd=self._folder, dst_dir_fd=self._folder, follow_symlinks=False)
            except OSError as e:
                if e.errno not in _NO_LINKS:
                    raise
                # A file system without hard links (FAT, exFAT, many FUSE and SMB mounts): the name is taken
                # empty, as open(path, "xb") takes it, then the whole file is renamed over it.
                claim = os.open(target, _EXCLUSIVE, 0o600, dir_fd=self._folder)
                try:
                    os.replace(self._tmp, target, src_dir_fd=self._folder, dst_dir_fd=self._folder)
                except BaseException:
                    # Not renamed (an error, a signal): the name is given back where it is still the empty claim
                    # (a file another writer renamed over it between the check and the unlink would go: Linux
                    # has no unlink of a name only while it is one file; the window is two system calls wide).
                    with contextlib.suppress(OSError):
                        if os.path.samestat(os.fstat(claim), os.stat(target, dir_fd=self._folder,
                                                                      follow_symlinks=False)):
                            os.unlink(target, dir_fd=self._folder)
                    raise
                finally:
                    os.close(claim)
                self._placed = True
                return
            self._placed = True
            os.unlink(self._tmp, dir_fd=self._folder)
            return
        os.replace(self._tmp, target, src_dir_fd=self._folder, dst_dir_fd=self._folder)
        self._placed = True

    def reopened(self) -> int:
        """A new descriptor reading the file from its start."""
        return os.open(self._tmp, os.O_RDONLY, dir_fd=self._folder)

    def keep_owner(self, replaced: os.stat_result, attributes: str | int | None) -> bool:
        """The owner and group of the file this one replaces, where this account may give them; whether it could."""
        try:
            os.chown(self._tmp, replaced.st_uid, replaced.st_gid, dir_fd=self._folder, follow_symlinks=False)
        except OSError:
            return False
        return True

    def close(self) -> None:
        if not self._placed and os.getpid() == self._pid:
            # Not found: a signal's exception landed just after the rename.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._tmp, dir_fd=self._folder)


def _proc_folder() -> int | None:
    """/proc/self/fd, open, through which a file without a name is linked
    in; None where this system cannot make such files (no O_TMPFILE, no /proc)."""
    # Looked up here, not at import: a platform without it may be simulated.
    if getattr(os, "O_TMPFILE", None) is None:
        return None
    try:
        return os.open(_PROC_FD, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None


class _Unnamed:
    """The result in a file without a name, linked in as the target when whole
    (names relative to the folder `dir_fd`, if given)."""

    def __init__(self, fd: int, proc: int, dir_fd: int | None) -> None:
        self._kept, self._proc, self._folder = fd, proc, dir_fd
        # The writer closes its descriptor when it has written everything;
        # this one keeps the file until it has a name.
        self.fd = os.dup(fd)

    @classmethod
    def create(cls, directory: str, proc: int | None, dir_fd: int | None = None) -> "_Unnamed | None":
        """A new file without a name in `directory`, or None where this system
        (`proc` None: _proc_folder) or its file system cannot make one."""
        if proc is None:
            return None
        fd = None
        try:
            fd = os.open(directory, os.O_TMPFILE | os.O_WRONLY, 0o600, dir_fd=dir_fd)
            return cls(fd, proc, dir_fd)
        except BaseException as e:
            if fd is not None:
                os.close(fd)
            if isinstance(e, OSError) and e.errno in _NO_UNNAMED:
                return None
            raise

    def link(self, path: str) -> None:
        """Give the file the name `path` (relative to its folder's descriptor,
        if it was made by one); FileExistsError where the name is taken."""
        # Given a folder descriptor, os.link calls linkat(2) with
        # AT_SYMLINK_FOLLOW, which follows /proc/self/fd/N to the file;
        # without one it calls link(2), which would link the symlink itself
        # (EXDEV: it is on /proc).
        os.link(str(self._kept), path, src_dir_fd=self._proc, dst_dir_fd=self._folder)

    def reopened(self) -> int:
        """A new descriptor reading the file from its start (through /proc/self/fd: the file has no name)."""
        return os.open(str(self._kept), os.O_RDONLY, dir_fd=self._proc)

    def keep_owner(self, replaced: os.stat_result, attributes: str | int | None) -> bool:
        """The owner and group of the file that this one replaces, where this account may give them (root may, a
        user only a group of theirs), and its extended attributes (read from `attributes`, its path or a
        descriptor; None: none to read), ACLs among them; whether the owner and group could be given."""
        try:
            os.fchown(self._kept, replaced.st_uid, replaced.st_gid)
            kept = True
        except OSError:
            kept = False
        if attributes is None:
            return kept
        with contextlib.suppress(OSError):
            for attribute in os.listxattr(attributes):
                with contextlib.suppress(OSError):   # security.* and trusted.* need privileges
                    os.setxattr(self._kept, attribute, os.getxattr(attributes, attribute))
        return kept

    def place(self, target: str, mode: int, exclusive: bool = False) -> None:
        os.fchmod(self._kept, mode)
        if exclusive:
            self.link(target)       # FileExistsError where the name was taken meanwhile
            return
        # WHY two ways: link(2) never replaces a name. Where the target's
        # name is free, the file takes it at once, and no moment leaves a
        # second name. Where a file has it, a name can be replaced at once
        # only by rename(2) (no linkat flag replaces; renameat2's NOREPLACE
        # and EXCHANGE also start from a name), so the file is linked under
        # a temporary name and renamed over the target. A kill in the
        # microseconds between the two calls leaves that name beside the old
        # file, which is intact; the file under it is whole, not partial.
        try:
            self.link(target)
            return
        except FileExistsError:
            pass
        directory, name = os.path.split(target)
        _, tmp = _new_name(directory, name, self.link, self._folder)
        try:
            os.replace(tmp, target, src_dir_fd=self._folder, dst_dir_fd=self._folder)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=self._folder)
            raise

    def close(self) -> None:
        # Not placed, the file goes with its last descriptor.
        os.close(self._kept)


@contextlib.contextmanager
def unnamed_file(dir_fd: int) -> Iterator[_Unnamed | None]:
    """A new file without a name in the folder `dir_fd`, gone at the end of
    the block unless given a name with its `link`; write it through its `fd`
    (yours to close). None where this system or the folder's file system
    cannot make one."""
    proc = _proc_folder()
    try:
        unnamed = _Unnamed.create(".", proc, dir_fd)
        if unnamed is None:
            yield None
            return
        try:
            yield unnamed
        finally:
            unnamed.close()
    finally:
        if proc is not None:
            os.close(proc)


@contextlib.contextmanager
def _naming(path: str) -> Iterator[None]:
    """An OSError in the block names `path`, the file the caller asked for, not the temporary one."""
    try:
        yield
    except OSError as e:
        raise type(e)(e.errno, e.strerror, path) from None


def check_folder(path: str, target: str | None = None) -> None:
    """The OSError (naming `path`) where a new file at `path` has no folder to go in: as open() finds it
    (realpath() takes "missing/.." for the folder it names without looking, and replacing() had written over
    "missing/../notes.txt", the input, where open() finds nothing), and as replacing() writes it, in a symbolic
    link's target's folder (`target`: realpath(path), where the caller has it)."""
    with _naming(path):
        for folder in dict.fromkeys((os.path.dirname(path), os.path.dirname(target or os.path.realpath(path)))):
            os.stat(os.path.join(folder or os.curdir, ""))


def _creation_mode() -> int:
    """The mode a plain open() would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _sync_folder(directory: str) -> None:
    """Make a rename in `directory` durable; best effort (some file systems refuse a folder's fsync)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _refuse_read_only(entry: str, path: str, dir_fd: int | None = None) -> None:
    """PermissionError naming `path` where the file an output replaces (`entry`, relative to the folder `dir_fd` if
    given) is one open(..., "wb") could not write, as age's open refuses it: the rename that replaces a file needs
    only the folder's permission."""
    if not os.access(entry, os.W_OK, dir_fd=dir_fd, effective_ids=os.access in os.supports_effective_ids):
        # On a file system mounted read-only, its own words (a read-only bind mount had been "Permission denied").
        read_only = False
        with contextlib.suppress(OSError):
            read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
        code = errno.EROFS if read_only else errno.EACCES
        raise OSError(code, os.strerror(code), path)


def _place(output: "_Unnamed | _Partial", f: IO[bytes] | DirectWriter, target: str, replaced: os.stat_result | None,
           attributes: str | int | None, durable: bool, sync_folder: Callable[[], None],
           exclusive: bool = False) -> None:
    """Close the written `f` and give `output` the name `target`. Replacing the regular file `replaced`, it keeps
    that file's mode, and where this account may give them, its owner, group and extended attributes (read from
    `attributes`); with `durable`, it is synced before the rename and the folder after (sync_folder): the file it
    replaces may have been the only copy (a re-key in place)."""
    if durable and replaced is not None:
        f.flush()
        os.fsync(f.fileno())
    f.close()
    mode = _creation_mode()
    if replaced is not None:
        mode = replaced.st_mode & 0o7777
        if not output.keep_owner(replaced, attributes):
            # Ours now, not its owner's: no set-user or set-group bit of theirs on it (as a chown clears them).
            mode &= ~(stat.S_ISUID | stat.S_ISGID)
    output.place(target, mode, exclusive)
    if durable and replaced is not None:
        sync_folder()


def _walk(path: str) -> tuple[str, os.stat_result | None] | None:
    """Look at each name on the way to `path`: PermissionError where one is a symbolic link in a sticky folder
    others may write (as /tmp) owned neither by this user nor by the folder's owner. Where the walk saw the whole
    way and no symbolic link on it (every folder there, `path` itself not a link), returns (the absolute path,
    which is then what realpath() would give, and what lstat found at `path`, None for nothing); else None.

    The kernel refuses to follow such a link (fs.protected_symlinks): it is
    how another account would point a name in /tmp at a file of yours.
    replacing() follows links itself (realpath, then a rename over what it
    found), past the kernel's check, so it makes the check itself.
    """
    # Not abspath: its normalization takes "link/.." away before the link is looked at.
    whole = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    parts = whole.split(os.sep)
    plain = True
    st: os.stat_result | None = None
    for i in range(2, len(parts) + 1):
        at = os.sep.join(parts[:i])
        try:
            st = os.lstat(at)
        except FileNotFoundError:
            # Nothing more on the way exists. Only a missing last name (a new file) leaves the way seen whole.
            return (os.path.normpath(whole), None) if plain and i == len(parts) else None
        except OSError:
            return None
        if not stat.S_ISLNK(st.st_mode):
            continue
        plain = False
        folder = os.stat(os.path.dirname(at))
        foreign = st.st_uid not in (os.geteuid(), folder.st_uid)
        if foreign and folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH:
            raise PermissionError(errno.EACCES, "a symbolic link another account made in a sticky folder, "
                                  "not followed", path)
    return (os.path.normpath(whole), st) if plain else None


@contextlib.contextmanager
def _closed_on_failure(f: IO[bytes] | DirectWriter) -> Iterator[None]:
    """Where the block fails, `f` is closed without a word: closing flushes what is buffered, which fails
    again as the write did (a full disk), and the write's error, which names the file, is the one to tell."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            f.close()
        raise


@contextlib.contextmanager
def _written_into(path: str) -> Iterator[Writer]:
    """`path` opened and written into as a plain open(path, "wb") writes it; closed at the end of the block."""
    f = open(path, "wb")
    with _closed_on_failure(f):
        yield f
    close(f)


class _OpenedAtFirstWrite:
    """The file `path`, opened for writing at once (which changes nothing: the name is looked up once, whatever
    the working folder later is) and emptied only at the first write, as age opens its output there: a run that
    fails before it writes anything (a wrong key, a bad recipient file) leaves the file as it was."""

    def __init__(self, path: str) -> None:
        self.name = path
        self._fd = os.open(path, os.O_WRONLY)
        self.file: IO[bytes] | None = None      # once opened(): it owns the descriptor

    def opened(self) -> IO[bytes]:
        """The file, emptied, to write the result to."""
        if self.file is None:
            os.ftruncate(self._fd, 0)
            self.file = open(self._fd, "wb")
        return self.file

    def write(self, data: memoryview, /) -> int | None:
        return self.opened().write(data)

    def flush(self) -> None:
        if self.file is not None:
            self.file.flush()

    def close_unwritten(self) -> None:
        """Close it as it is after a failure: what was written stays, and if nothing was, nothing was emptied."""
        if self.file is None:
            os.close(self._fd)
        else:
            with contextlib.suppress(OSError):      # the write's error is the one to tell (_closed_on_failure)
                self.file.close()


@contextlib.contextmanager
def _written_in_place(path: str) -> Iterator[Writer]:
    """The regular file `path` written in place, as age writes its output: emptied at the first write (or at the
    end of a block that wrote nothing, as age 1.3's decryption, whose out.Write(nil) opens it), then written; a
    failure leaves what was written before it."""
    lazy = _OpenedAtFirstWrite(path)
    try:
        yield lazy
    except BaseException:
        lazy.close_unwritten()
        raise
    close(lazy.opened())


# How a folder refuses a new file where a file in it may still be written: no permission to write in it (EACCES;
# EPERM for an immutable one), or a read-only mount (EROFS: a container's read-only root, a file bind-mounted in).
_NO_NEW_FILE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


def _copied_in_place(output: "_Unnamed | _Partial", target: str) -> None:
    """The whole result in `output` written into the file `target` in place (emptied first), as age writes it:
    in the kernel where it can (agefast.io.copy, imported here: only a mount-point output needs it)."""
    from .copy import copy_rest
    from .source import Source

    with open(output.reopened(), "rb") as src, open(target, "wb") as dst:
        copy_rest(Source(src), dst, (src.fileno(), 0))


@contextlib.contextmanager
def replacing(path: str | bytes, direct: bool = False, durable: bool = False,
              exclusive: bool = False, in_place_if_refused: bool = False) -> Iterator[Writer]:
    """A binary file to write the result to; it becomes `path` only if the
    block ends without an exception (but see in_place_if_refused). direct=True
    writes with O_DIRECT.
    exclusive=True makes a new file, as open(path, "xb") does: FileExistsError
    where a name `path` is there (a symbolic link too), when the block starts
    or when the file takes its name.

    A file it replaces must be one open() could write (a read-only file is a
    PermissionError, as age's open gives), and the result keeps its mode,
    and, where this account may give them, its owner, group and extended
    attributes. durable=True syncs the result before it replaces a file,
    and the folder after (agefast-rekey in place: a crash after the rename
    must not leave the only copy unwritten).

    in_place_if_refused=True: where the folder refuses a new file (no
    permission to write in it) but `path` is a regular file open() could
    write, it is written in place, as age writes its output: emptied at the
    first write, then written, and a failure leaves what was written before
    it (nothing written, the file as it was). A read-only folder (EROFS)
    is one such. Where the rename cannot replace `path` (EBUSY: a mount
    point, as a file bind-mounted into a container), the whole result is
    then written into it. Neither is synced: `durable` outputs (agefast-rekey's,
    whose OUTPUT may be its INPUT) are never written in place.
    """
    path = os.fsdecode(path)
    if exclusive and os.path.lexists(path):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
    # No link on the way (the usual case), the walk has looked up all that realpath(), stat() and check_folder()
    # would: 19 of the 40 us that a 1 KiB output took over open(path, "xb") (2026-12-07, Zen 5, tmpfs).
    plainly = _walk(path)
    there: os.stat_result | None
    if plainly is None:
        # What is there, as opening `path` finds it: realpath() turns /dev/stdout
        # or /dev/fd/N over a pipe into /proc/PID/fd/pipe:[N], which names nothing.
        try:
            there = os.stat(path)
        except FileNotFoundError:
            there = None
    else:
        target, there = plainly
    if there is not None and stat.S_ISDIR(there.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if there is not None and not stat.S_ISREG(there.st_mode):
        with _written_into(path) as device:     # a pipe, a FIFO, a terminal, /dev/null: as age writes it
            yield device
        return
    if there is not None:
        _refuse_read_only(path, path)
    if plainly is None:
        target = os.path.realpath(path)
        if there is None:
            check_folder(path, target)
    directory, name = os.path.split(target)
    proc = _proc_folder()
    try:
        in_place = in_place_if_refused and there is not None     # an output that can be written in place
        output: _Unnamed | _Partial | None = None
        try:
            with _naming(path):
                output = _Unnamed.create(directory, proc) or _Partial(directory, name)
        except OSError as e:
            if not (in_place and e.errno in _NO_NEW_FILE):
                raise
        if output is None:
            with _written_in_place(path) as written:
                yield written
            return
        try:
            f: IO[bytes] | DirectWriter
            # The writer owns output.fd. Named by the caller's path, which a
            # failed write's OSError then names (agefast.io.writes.write_failed).
            f = DirectWriter(output.fd, name=path) if direct else open(path, "wb",
                                                                        opener=lambda _path, _flags: output.fd)
            with _closed_on_failure(f):
                yield f
            with _naming(path):
                try:
                    _place(output, f, target, there, target, durable, lambda: _sync_folder(directory), exclusive)
                except OSError as e:
                    if not (in_place and e.errno == errno.EBUSY):
                        raise
                    _copied_in_place(output, target)
        finally:
            output.close()
    finally:
        if proc is not None:
            os.close(proc)


class Folder:
    """A folder that outputs are written into, each whole or not at all, as replacing() writes one.

    replacing() looks up each output's folder (through every symlink of its
    path), /proc/self/fd and the mode of a new file; agefast-tree writes
    thousands of small files into a few folders, where those lookups were
    most of what writing a file cost (a 32 KiB file: 86 us a file through
    replacing(), 42 us through a Folder of its own, 2026-12-05, Zen 4,
    tmpfs). An output's name is an entry of this folder: whatever has the
    name (a file, a symlink) is replaced, never written through.
    """

    def __init__(self, path: str | bytes, fd: int | None = None) -> None:
        """The folder at `path`; or, given `fd`, the folder open there (the Folder then owns it, and `path`
        only names it in errors), where the caller found it its own way (agefast.tree.store: no link followed)."""
        self._path = os.fsdecode(path)
        self._fd: int | None = None
        self._proc: int | None = None
        if fd is None and os.open not in os.supports_dir_fd:
            # Windows names no file relative to an open folder: there an
            # output is named by its path.
            if not os.path.isdir(self._path):
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), self._path)
            return
        if fd is None:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        self._fd = fd
        try:
            self._proc = _proc_folder()
        except BaseException:
            os.close(fd)
            raise

    def __enter__(self) -> "Folder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in (self._fd, self._proc):
            if fd is not None:
                os.close(fd)

    def _entry(self, name: str) -> str:
        """`name` as the calls taking dir_fd=self._fd find it."""
        return name if self._fd is not None else os.path.join(self._path, name)

    def _replaced(self, name: str) -> os.stat_result | None:
        """The regular file the output `name` replaces; None where there is none, or a symlink or special file,
        which the output replaces as a new file would."""
        try:
            st = os.stat(self._entry(name), dir_fd=self._fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return st if stat.S_ISREG(st.st_mode) else None

    def _sync(self) -> None:
        if self._fd is None:
            _sync_folder(self._path)
        else:
            with contextlib.suppress(OSError):      # as _sync_folder: some file systems refuse a folder's fsync
                os.fsync(self._fd)

    @contextlib.contextmanager
    def replacing(self, name: str | bytes, durable: bool = False) -> Iterator[IO[bytes]]:
        """An unbuffered binary file to write the output `name` (an entry of
        this folder) to; it takes the name only if the block ends without an
        exception. A regular file it replaces is treated as replacing()
        treats one: refused if read-only, its mode, owner, group and
        extended attributes kept, and with `durable`, the output synced."""
        name = os.fsdecode(name)
        path = os.path.join(self._path, name)
        replaced = self._replaced(name)
        if replaced is not None:
            _refuse_read_only(self._entry(name), path, self._fd)
        with _naming(path):
            output = _Unnamed.create(".", self._proc, self._fd) or _Partial(self._entry(""), name, self._fd)
        try:
            f = open(output.fd, "wb", buffering=0)
            try:
                yield f
            except BaseException:
                with contextlib.suppress(OSError):
                    f.close()
                raise
            with _naming(path), self._attributes(name, replaced) as attributes:
                _place(output, f, self._entry(name), replaced, attributes, durable, self._sync)
        finally:
            output.close()

    @contextlib.contextmanager
    def _attributes(self, name: str, replaced: os.stat_result | None) -> Iterator[str | int | None]:
        """Where the extended attributes of the replaced file `name` are read: a descriptor of it, opened without
        following a link (its path could lead elsewhere by now); its path where no call takes a folder's
        descriptor; None where there is none to read."""
        if replaced is None or self._fd is None:
            yield None if replaced is None else self._entry(name)
            return
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self._fd)
        except OSError:     # unreadable: its attributes are too
            yield None
            return
        try:
            yield fd
        finally:
            os.close(fd)
