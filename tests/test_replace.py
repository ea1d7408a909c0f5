"""agefast.io.replace: the result has no name until it is whole (O_TMPFILE),
and where the system cannot make a file without a name, a temporary name
renamed over the target gives the same all-or-nothing result."""

import contextlib
import errno
import os
import types

import pytest

from agefast.io import replace
from unnamed_files import require_unnamed_files


@pytest.fixture
def unnamed_files(tmp_path):
    require_unnamed_files(tmp_path)


def _no_o_tmpfile(monkeypatch, tmp_path):
    monkeypatch.delattr(os, "O_TMPFILE", raising=False)


def _no_proc(monkeypatch, tmp_path):
    monkeypatch.setattr(replace, "_PROC_FD", str(tmp_path / "no-proc"))


def _file_system_without_o_tmpfile(monkeypatch, tmp_path):
    real_open = os.open
    o_tmpfile = getattr(os, "O_TMPFILE", 0)

    def open_(path, flags, mode=0o777, *, dir_fd=None):
        if o_tmpfile and flags & o_tmpfile == o_tmpfile:
            raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP), path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(replace.os, "open", open_)


FALLBACKS = {"no O_TMPFILE": _no_o_tmpfile, "no /proc/self/fd": _no_proc,
             "a file system without O_TMPFILE": _file_system_without_o_tmpfile}


def _names(directory) -> list[str]:
    return sorted(os.listdir(directory))


@pytest.mark.parametrize("old", [None, b"old"], ids=["new file", "existing file"])
def test_the_result_has_no_name_until_it_is_whole(tmp_path, old, unnamed_files):
    out = tmp_path / "out"
    if old is not None:
        out.write_bytes(old)
    with replace.replacing(out) as f:
        f.write(b"new")
        f.flush()
        # Nothing a kill could leave: the directory holds what it held.
        assert _names(tmp_path) == ([] if old is None else ["out"])
        if old is not None:
            assert out.read_bytes() == old
    assert out.read_bytes() == b"new"
    assert _names(tmp_path) == ["out"]


@pytest.mark.parametrize("fallback", [None, *FALLBACKS.values()], ids=["", *FALLBACKS.keys()])
@pytest.mark.parametrize("length", [234, 255])
def test_a_file_whose_name_is_as_long_as_names_go_is_replaced(length, fallback, tmp_path, monkeypatch):
    # Its temporary name, 22 bytes longer, was refused (ENAMETOOLONG): no such file could be written over.
    if fallback is not None:
        fallback(monkeypatch, tmp_path)
    out = tmp_path / ("\u00e9" * (length // 2) + "z" * (length % 2))    # two bytes a character: one cut inside one
    out.write_bytes(b"old")
    with replace.replacing(out) as f:
        f.write(b"new")
    assert out.read_bytes() == b"new"
    assert _names(tmp_path) == [out.name]


@pytest.mark.parametrize("fallback", FALLBACKS.values(), ids=FALLBACKS.keys())
def test_without_unnamed_files_a_temporary_name_is_renamed_over_the_target(fallback, tmp_path, monkeypatch):
    fallback(monkeypatch, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    out = work / "out"
    out.write_bytes(b"old")
    out.chmod(0o640)
    with replace.replacing(out) as f:
        f.write(b"new")
        f.flush()
        [temporary] = [name for name in _names(work) if name != "out"]
        assert temporary.startswith(".out.") and temporary.endswith(".partial")
        assert (work / temporary).read_bytes() == b"new"
        assert out.read_bytes() == b"old"
    assert out.read_bytes() == b"new"
    assert out.stat().st_mode & 0o777 == 0o640
    assert _names(work) == ["out"]
    with pytest.raises(ValueError), replace.replacing(out) as f:
        f.write(b"not whole")
        raise ValueError
    assert out.read_bytes() == b"new"
    assert _names(work) == ["out"]


def _link_then_interrupted(src, dst, *, real_link=os.link, **kwargs):
    # A signal's exception lands as soon as link() returns.
    real_link(src, dst, **kwargs)
    raise KeyboardInterrupt


def _rename_refused(src, dst, **kwargs):
    raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), src, dst)


PLACING_FAILURES = {"a signal just after the temporary link": ("link", _link_then_interrupted, KeyboardInterrupt),
                    "a failed rename": ("replace", _rename_refused, PermissionError)}


@pytest.mark.parametrize("fallback", [None, *FALLBACKS.values()], ids=["", *FALLBACKS.keys()])
def test_exclusive_makes_a_new_file_and_never_takes_a_name_that_is_there(fallback, tmp_path, monkeypatch):
    # As open(path, "xb"), but named only when whole: for the age:: filesystem's "xb" on a local disk.
    if fallback is None:
        require_unnamed_files(tmp_path)
    else:
        fallback(monkeypatch, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    with replace.replacing(work / "new", exclusive=True) as f:
        f.write(b"new")
        f.flush()
        assert not (work / "new").exists()
    assert (work / "new").read_bytes() == b"new"
    for there in ("new", "dangling"):
        if there == "dangling":
            (work / "dangling").symlink_to(work / "nowhere")
        with pytest.raises(FileExistsError):
            with replace.replacing(work / there, exclusive=True):
                pass
    # a name taken while the file was written is left to the file that took it
    with pytest.raises(FileExistsError):
        with replace.replacing(work / "raced", exclusive=True) as f:
            f.write(b"mine")
            (work / "raced").write_bytes(b"theirs")
    assert (work / "raced").read_bytes() == b"theirs"
    assert _names(work) == ["dangling", "new", "raced"]


def test_exclusive_on_a_file_system_without_hard_links(tmp_path, monkeypatch):
    # FAT, exFAT, many FUSE and SMB mounts: neither O_TMPFILE nor link(2) (EPERM). exclusive=True had written the
    # whole file and failed at its end (found by a review); open(path, "xb") works there.
    _no_o_tmpfile(monkeypatch, tmp_path)

    def no_links(*args, **kwargs):
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
    monkeypatch.setattr(replace.os, "link", no_links)
    with replace.replacing(tmp_path / "new", exclusive=True) as f:
        f.write(b"new")
    assert (tmp_path / "new").read_bytes() == b"new" and _names(tmp_path) == ["new"]
    with pytest.raises(FileExistsError):
        with replace.replacing(tmp_path / "raced", exclusive=True) as f:
            f.write(b"mine")
            (tmp_path / "raced").write_bytes(b"theirs")
    assert (tmp_path / "raced").read_bytes() == b"theirs" and _names(tmp_path) == ["new", "raced"]
    # a rename that fails gives the name back: no empty file is left under it
    def no_rename(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    monkeypatch.setattr(replace.os, "replace", no_rename)
    with pytest.raises(PermissionError):
        with replace.replacing(tmp_path / "refused", exclusive=True) as f:
            f.write(b"mine")
    assert _names(tmp_path) == ["new", "raced"]


@pytest.mark.parametrize("failure", PLACING_FAILURES.values(), ids=PLACING_FAILURES.keys())
def test_a_failure_replacing_a_file_leaves_it_and_no_temporary_name(failure, tmp_path, monkeypatch, unnamed_files):
    # An existing file is replaced through a temporary name (link(2) never
    # replaces one), then renamed over it.
    function, failing, error = failure
    out = tmp_path / "out"
    out.write_bytes(b"old")
    with pytest.raises(error) as raised, replace.replacing(out) as f:
        f.write(b"new")
        monkeypatch.setattr(replace.os, function, failing)
    # An OSError names the file the caller asked for.
    assert getattr(raised.value, "filename", str(out)) == str(out)
    assert out.read_bytes() == b"old"
    assert _names(tmp_path) == ["out"]


def test_a_full_disk_is_told_once_named_and_leaves_the_file(tmp_path, monkeypatch):
    # On a full disk, closing after a failed write flushes what is buffered and fails again, unnamed: the error
    # told is the write's, which names the file; a close that fails after the block is named too.
    real_open = open

    class Full:
        def __init__(self, *args, **kwargs):
            self._f = real_open(*args, **kwargs)

        def write(self, data):
            return self._f.write(data)

        def close(self):
            self._f.close()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(replace, "open", Full, raising=False)
    out = tmp_path / "out"
    out.write_bytes(b"old")
    with pytest.raises(OSError) as failed, replace.replacing(out) as f:
        f.write(b"new")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out))
    assert failed.value.filename == str(out) and out.read_bytes() == b"old"
    with pytest.raises(OSError) as failed, replace.replacing(out) as f:
        f.write(b"new")
    assert (failed.value.errno, failed.value.filename) == (errno.ENOSPC, str(out)) and out.read_bytes() == b"old"
    assert _names(tmp_path) == ["out"]


def test_a_new_file_takes_its_name_directly(tmp_path, monkeypatch, unnamed_files):
    # Where the name is free, no temporary name is made: no moment at all
    # could leave a second name behind.
    made = []
    real_link = os.link

    def recorded(src, dst, **kwargs):
        made.append(dst)
        real_link(src, dst, **kwargs)

    monkeypatch.setattr(replace.os, "link", recorded)
    with replace.replacing(tmp_path / "out") as f:
        f.write(b"new")
    assert made == [str(tmp_path / "out")]
    assert (tmp_path / "out").read_bytes() == b"new"


def _folder_ways(monkeypatch, tmp_path, way):
    if way == "unnamed":
        require_unnamed_files(tmp_path)
    else:
        FALLBACKS[way](monkeypatch, tmp_path)


FOLDER_WAYS = ["unnamed", *FALLBACKS]


@pytest.mark.parametrize("way", FOLDER_WAYS)
def test_a_folder_writes_each_output_whole_or_not_at_all(way, tmp_path, monkeypatch):
    _folder_ways(monkeypatch, tmp_path, way)
    work = tmp_path / "work"
    work.mkdir()
    (work / "old").write_bytes(b"old")
    (work / "old").chmod(0o640)
    with replace.Folder(work) as folder:
        with folder.replacing(b"new") as f:
            f.write(b"new file")
        with folder.replacing("old") as f:
            f.write(b"replaced")
        with pytest.raises(ValueError), folder.replacing("old") as f:
            f.write(b"not whole")
            raise ValueError
        with pytest.raises(ValueError), folder.replacing("never") as f:
            f.write(b"not whole")
            raise ValueError
    assert _names(work) == ["new", "old"]
    assert (work / "new").read_bytes() == b"new file"
    assert (work / "old").read_bytes() == b"replaced"
    assert (work / "old").stat().st_mode & 0o777 == 0o640
    umask = os.umask(0)
    os.umask(umask)
    assert (work / "new").stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_folder_replaces_a_symlink_instead_of_writing_through_it(tmp_path, unnamed_files):
    # A tree's output is an entry of its folder: a link there must not send it elsewhere.
    outside = tmp_path / "outside"
    outside.write_bytes(b"outside")
    work = tmp_path / "work"
    work.mkdir()
    (work / "out").symlink_to(outside)
    with replace.Folder(work) as folder, folder.replacing("out") as f:
        f.write(b"new")
    assert not (work / "out").is_symlink()
    assert (work / "out").read_bytes() == b"new"
    assert outside.read_bytes() == b"outside"


def test_a_folder_names_the_output_in_its_errors(tmp_path, unnamed_files):
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    with pytest.raises(IsADirectoryError) as raised, replace.Folder(work) as folder, folder.replacing("out") as f:
        f.write(b"new")
    assert raised.value.filename == str(work / "out")
    assert _names(work) == ["out"]


def test_where_no_call_takes_a_folder_descriptor_a_folder_names_outputs_by_path(tmp_path, monkeypatch):
    # As on Windows: no O_TMPFILE, and os.supports_dir_fd is empty.
    _no_o_tmpfile(monkeypatch, tmp_path)
    monkeypatch.setattr(replace.os, "supports_dir_fd", set())
    with pytest.raises(FileNotFoundError):
        replace.Folder(tmp_path / "missing")
    (tmp_path / "old").write_bytes(b"old")
    with replace.Folder(tmp_path) as folder:
        with folder.replacing("old") as f:
            f.write(b"replaced")
        with pytest.raises(ValueError), folder.replacing("never") as f:
            f.write(b"not whole")
            raise ValueError
    assert _names(tmp_path) == ["old"]
    assert (tmp_path / "old").read_bytes() == b"replaced"


@pytest.mark.requires_root("a symbolic link owned by another account")
def test_a_link_another_account_made_in_a_sticky_folder_is_not_followed(tmp_path):
    # As the kernel refuses to follow it (fs.protected_symlinks): another account's name in /tmp pointing at a file
    # of yours must not have the output written over that file.
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    precious = tmp_path / "precious"
    precious.write_bytes(b"precious")
    for name, owner in (("theirs", 65534), ("mine", os.geteuid())):
        (sticky / name).symlink_to(precious)
        os.lchown(sticky / name, owner, owner)
    for through in (sticky / "theirs", sticky / "theirs" / ".." / "x"):
        with pytest.raises(PermissionError, match="a symbolic link another account made in a sticky folder"):
            with replace.replacing(through) as f:
                f.write(b"output")
    assert precious.read_bytes() == b"precious"
    with replace.replacing(sticky / "mine") as f:
        f.write(b"output")
    assert precious.read_bytes() == b"output"


def _as_account(uid, work):
    """work() with the effective user `uid` where this is root (a user's own permissions otherwise)."""
    if os.geteuid() != 0:
        return work()
    os.seteuid(uid)
    try:
        return work()
    finally:
        os.seteuid(0)


@contextlib.contextmanager
def _through_a_folder(target, durable=False):
    with replace.Folder(os.path.dirname(target)) as folder, folder.replacing(os.path.basename(target), durable) as f:
        yield f


# The two ways an output replaces a file, which must treat the file they replace alike: agefast-tree's outputs
# had replaced read-only files, handed the files of others to root (a user's setuid file became root's) and
# re-keyed in place unsynced.
REPLACING = {"replacing()": replace.replacing, "Folder.replacing()": _through_a_folder}


@pytest.mark.parametrize("replacing", REPLACING.values(), ids=REPLACING)
def test_a_file_on_a_read_only_file_system_is_refused_in_its_words(replacing, tmp_path, monkeypatch):
    # A read-only bind mount had been "Permission denied".
    target = tmp_path / "archive.age"
    target.write_bytes(b"the only copy")
    monkeypatch.setattr(replace.os, "access", lambda *args, **kwargs: False)
    statvfs = os.statvfs
    monkeypatch.setattr(replace.os, "statvfs", lambda path: types.SimpleNamespace(
        f_flag=statvfs(path).f_flag | os.ST_RDONLY))
    with pytest.raises(OSError) as refused, replacing(str(target)) as f:
        f.write(b"output")
    assert (refused.value.errno, refused.value.filename) == (errno.EROFS, str(target))
    assert target.read_bytes() == b"the only copy"


@pytest.mark.parametrize("replacing", REPLACING.values(), ids=REPLACING)
def test_a_read_only_file_is_not_replaced(replacing):
    # As age's open(O_WRONLY) refuses it: the rename that replaces a file needs only the folder's permission,
    # and `agefast -o archive.age` had replaced a chmod 444 archive.
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(dir="/tmp")      # not under pytest's 0700 folder: another account must reach it
    try:
        owner = 65534 if os.geteuid() == 0 else os.geteuid()
        target = os.path.join(folder, "archive.age")
        with open(target, "wb") as f:
            f.write(b"the only copy")
        os.chown(folder, owner, -1)
        os.chown(target, owner, -1)
        os.chmod(target, 0o444)

        def replace_it():
            with replacing(target) as f:
                f.write(b"output")

        with pytest.raises(PermissionError) as refused:
            _as_account(owner, replace_it)
        assert refused.value.filename == target
        assert open(target, "rb").read() == b"the only copy" and os.listdir(folder) == ["archive.age"]
        os.chmod(target, 0o644)
        _as_account(owner, replace_it)
        assert open(target, "rb").read() == b"output"
    finally:
        shutil.rmtree(folder)


@pytest.mark.requires_root("a file of another account's")
@pytest.mark.parametrize("replacing", REPLACING.values(), ids=REPLACING)
@pytest.mark.parametrize("fallback", [None, *FALLBACKS])
def test_the_result_keeps_the_owner_and_attributes_of_the_file_it_replaces(tmp_path, monkeypatch, fallback,
                                                                           replacing):
    # Root rekeying a user's file in place had handed it to root, and dropped its ACLs and attributes.
    if fallback is not None:
        FALLBACKS[fallback](monkeypatch, tmp_path)
    target = tmp_path / "user.age"
    target.write_bytes(b"old")
    os.chown(target, 65534, 65534)
    target.chmod(0o4750)
    try:
        os.setxattr(target, "user.note", b"kept")
    except OSError:
        pytest.skip("this file system takes no user.* attributes")
    with replacing(str(target)) as f:
        f.write(b"new")
    st = target.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (65534, 65534, 0o4750)
    assert target.read_bytes() == b"new"
    if fallback is None:    # the fallbacks keep the owner: the name-only route off Linux has no attributes to copy
        assert os.getxattr(target, "user.note") == b"kept"


@pytest.mark.parametrize("replacing", REPLACING.values(), ids=REPLACING)
@pytest.mark.parametrize("exists", [True, False])
def test_durable_syncs_the_result_before_it_replaces_a_file(tmp_path, monkeypatch, exists, replacing):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(replace.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    target = tmp_path / "in-place.age"
    if exists:
        target.write_bytes(b"the only copy")
    with replacing(str(target), durable=True) as f:
        f.write(b"rekeyed")
    assert target.read_bytes() == b"rekeyed"
    assert len(synced) == (2 if exists else 0)      # the file, then its folder
    synced.clear()
    with replacing(str(target)) as f:
        f.write(b"again")
    assert synced == []


@pytest.mark.parametrize("replacing", REPLACING.values(), ids=REPLACING)
@pytest.mark.parametrize("fallback", [None, "no O_TMPFILE"])
def test_a_file_whose_owner_cannot_be_kept_loses_its_set_id_bits(tmp_path, monkeypatch, fallback, replacing):
    # An account that may not give the owner back had made the result its own, with the replaced file's
    # set-user-ID bit: another account's setuid program turned into one of its own.
    if fallback is not None:
        FALLBACKS[fallback](monkeypatch, tmp_path)

    def refused(*args, **kwargs):
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
    monkeypatch.setattr(replace.os, "fchown", refused)
    monkeypatch.setattr(replace.os, "chown", refused)
    target = tmp_path / "tool"
    target.write_bytes(b"old")
    target.chmod(0o6755)
    with replacing(str(target)) as f:
        f.write(b"new")
    assert target.stat().st_mode & 0o7777 == 0o755 and target.read_bytes() == b"new"


@pytest.mark.parametrize("name, error", [("missing/../notes.txt", FileNotFoundError),
                                         ("missing/new.txt", FileNotFoundError),
                                         ("notes.txt/new.txt", NotADirectoryError)])
def test_a_folder_open_would_not_find_is_an_error_as_open_gives(tmp_path, monkeypatch, name, error):
    # realpath() took "missing/.." for the folder it names without looking: encrypt_file("notes.txt",
    # "missing/../notes.txt") wrote its output over its input, where open() (and Go age) find no such file.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_bytes(b"the input")
    with pytest.raises(error) as refused:
        with replace.replacing(name) as f:
            f.write(b"output")
    assert refused.value.filename == name
    assert (tmp_path / "notes.txt").read_bytes() == b"the input"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_file_in_a_folder_that_takes_no_new_file_is_written_in_place_only_when_asked(refusing_folder):
    target = str(refusing_folder / "out")
    with pytest.raises(PermissionError):
        with replace.replacing(target) as f:
            f.write(b"new")
    with pytest.raises(RuntimeError):
        with replace.replacing(target, in_place_if_refused=True) as f:
            raise RuntimeError("failed before writing")
    assert (refusing_folder / "out").read_bytes() == b"old contents, longer than the new ones"
    with replace.replacing(target, in_place_if_refused=True) as f:
        f.write(b"new")
    assert (refusing_folder / "out").read_bytes() == b"new"
    assert sorted(p.name for p in refusing_folder.iterdir()) == ["out"]


def test_a_file_a_rename_cannot_replace_is_written_whole_in_place_only_when_asked(bind_mounted_file):
    target, source = bind_mounted_file
    with pytest.raises(OSError) as e:
        with replace.replacing(str(target)) as f:
            f.write(b"new")
    assert e.value.errno == errno.EBUSY
    with replace.replacing(str(target), in_place_if_refused=True) as f:
        f.write(b"new")
    assert source.read_bytes() == b"new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["source", "target"]


@pytest.mark.parametrize("where", ["refusing", "bind-mounted"])
def test_a_file_written_in_place_is_the_one_named_when_writing_began(where, request, tmp_path, monkeypatch):
    # The working folder changed by a callback or another thread had sent the bytes to another file of that name.
    target = request.getfixturevalue("refusing_folder") / "out" if where == "refusing" else \
        request.getfixturevalue("bind_mounted_file")[0]
    monkeypatch.chdir(target.parent)
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / target.name).write_bytes(b"someone else's")
    with replace.replacing(target.name, in_place_if_refused=True) as f:
        os.chdir(other)
        f.write(b"new")
    written = target if where == "refusing" else request.getfixturevalue("bind_mounted_file")[1]
    assert written.read_bytes() == b"new"
    assert (other / target.name).read_bytes() == b"someone else's"
