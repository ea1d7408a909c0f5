"""Wrong arguments are refused before anything is read or written, and no
call ever destroys its input or a file descriptor it was not given to own."""

import gc
import io
import mmap
import os
import socket
import tempfile

import pytest

import agefast
from dev_mode import nothing_ignored
from agefast import errors

IDENTITY = agefast.x25519.Identity.generate()
RECIPIENT = IDENTITY.to_public()
PLAINTEXT = b"the input must survive" * 1000


@pytest.fixture
def files(tmp_path):
    """A plaintext file, its encryption, and a function listing tmp_path."""
    plain = tmp_path / "plain"
    plain.write_bytes(PLAINTEXT)
    sealed = tmp_path / "sealed.age"
    sealed.write_bytes(agefast.encrypt(PLAINTEXT, [RECIPIENT]))
    return plain, sealed, lambda: sorted(p.name for p in tmp_path.iterdir())


def _fd_is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


@pytest.mark.parametrize("which", ["infile", "outfile"])
@pytest.mark.parametrize("function", ["encrypt_file", "decrypt_file"])
def test_an_int_path_is_a_type_error_and_the_descriptor_stays_open(which, function, files):
    plain, sealed, listing = files
    key = [RECIPIENT] if function == "encrypt_file" else [IDENTITY]
    infile = plain if function == "encrypt_file" else sealed
    spare = plain.parent / "spare"
    spare.write_bytes(b"")
    before = listing()
    fd = os.open(infile, os.O_RDONLY) if which == "infile" else os.open(spare, os.O_WRONLY)
    try:
        args = (fd, plain.parent / "out") if which == "infile" else (infile, fd)
        with pytest.raises(TypeError, match=which):
            getattr(agefast, function)(*args, key)
        assert _fd_is_open(fd)
    finally:
        if _fd_is_open(fd):
            os.close(fd)
    assert listing() == before
    assert spare.read_bytes() == b""


@pytest.mark.parametrize("how", ["same path", "symlink to input", "input is a symlink", "hard link"])
def test_one_file_as_input_and_output_is_refused(how, files, tmp_path):
    plain, sealed, listing = files
    for function, infile, key in (("encrypt_file", plain, RECIPIENT), ("decrypt_file", sealed, IDENTITY)):
        content = infile.read_bytes()
        other = tmp_path / f"other-{infile.name}"
        if how == "same path":
            args = (infile, infile)
        elif how == "symlink to input":
            other.symlink_to(infile)
            args = (infile, other)
        elif how == "input is a symlink":
            other.symlink_to(infile)
            args = (other, infile)
        else:
            os.link(infile, other)
            args = (infile, other)
        before = listing()
        with pytest.raises(errors.SameFileError):
            getattr(agefast, function)(*args, [key])
        assert infile.read_bytes() == content
        assert listing() == before  # no temporary file left either


def test_output_through_a_symlink_replaces_its_target(files, tmp_path):
    plain, _, _ = files
    target = tmp_path / "target"
    target.write_bytes(b"old")
    link = tmp_path / "link"
    link.symlink_to(target)
    agefast.encrypt_file(plain, link, [RECIPIENT])
    assert link.is_symlink()
    assert agefast.decrypt(target.read_bytes(), [IDENTITY]) == PLAINTEXT


def test_output_keeps_an_existing_files_mode(files, tmp_path):
    # As a plain open() that truncates it would, and as the command's -o does.
    plain, _, _ = files
    out = tmp_path / "out.age"
    out.write_bytes(b"old")
    out.chmod(0o640)
    agefast.encrypt_file(plain, out, [RECIPIENT])
    assert out.stat().st_mode & 0o777 == 0o640
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".partial")]


def test_the_temporary_output_never_opens_a_file_already_there(files, tmp_path, monkeypatch):
    # Its name is taken by a symlink to another file (a clash, or a planted
    # link): a new name is drawn, and the other file is left as it was.
    from agefast.io import replace

    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    draws = iter([b"\x00" * 6, b"\x01" * 6])
    monkeypatch.setattr(replace.os, "urandom", lambda n: next(draws))
    (tmp_path / ".out.000000000000.partial").symlink_to(victim)
    fd, tmp = replace.create_partial(str(tmp_path), "out")
    os.close(fd)
    assert tmp == str(tmp_path / ".out.010101010101.partial")
    assert os.stat(tmp).st_mode & 0o777 == 0o600
    assert victim.read_bytes() == b"keep me"


def test_no_free_temporary_name_is_an_error_naming_the_directory(tmp_path, monkeypatch):
    from agefast.io import replace

    monkeypatch.setattr(replace.os, "urandom", lambda n: b"\x00" * n)
    (tmp_path / ".out.000000000000.partial").write_bytes(b"")
    with pytest.raises(FileExistsError) as raised:
        replace.create_partial(str(tmp_path), "out")
    assert raised.value.filename == str(tmp_path)
    assert (tmp_path / ".out.000000000000.partial").read_bytes() == b""


def test_a_signal_just_after_the_temporary_output_is_created_leaves_no_file(files, tmp_path, monkeypatch):
    # A signal's exception lands as soon as open() returns, before the
    # descriptor reaches the output's cleanup.
    from agefast.io import replace

    plain, _, _ = files
    real_open = os.open
    # Only where no file without a name (O_TMPFILE) can be made is there a temporary name.
    monkeypatch.delattr(os, "O_TMPFILE", raising=False)

    def open_then_interrupted(path, flags, mode=0o777, *, dir_fd=None):
        os.close(real_open(path, flags, mode, dir_fd=dir_fd))
        raise KeyboardInterrupt

    monkeypatch.setattr(replace.os, "open", open_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        agefast.encrypt_file(plain, tmp_path / "out.age", [RECIPIENT])
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".out.age")]


def test_output_to_a_fifo_writes_into_it(files, tmp_path):
    # A FIFO (or a device) cannot be replaced by renaming a temporary file
    # over it; doing so would swap the node for a regular file.
    plain, _, _ = files
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # Opened for reading first, so that opening it for writing does not
    # block; the age file (~22 KB) fits in the pipe's buffer.
    read_end = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        agefast.encrypt_file(plain, fifo, [RECIPIENT])
        got = os.read(read_end, 1 << 20)
    finally:
        os.close(read_end)
    assert fifo.is_fifo()
    assert agefast.decrypt(got, [IDENTITY]) == PLAINTEXT


def test_reading_and_appending_one_file_is_refused(files):
    plain, _, _ = files
    with open(plain, "rb") as src, open(plain, "ab") as dst:
        with pytest.raises(errors.SameFileError):
            agefast.encrypt_io(src, dst, [RECIPIENT])
    assert plain.read_bytes() == PLAINTEXT


@pytest.mark.parametrize("kind", ["BytesIO", "mmap"])
@pytest.mark.parametrize("function", ["encrypt_io", "decrypt_io", "rekey_io"])
def test_one_object_to_read_and_write_at_one_position_is_refused(kind, function, tmp_path):
    # A BytesIO (or mmap) as both reader and writer had its input overwritten as it was read: encrypt_io
    # returned with neither the plaintext kept nor a file that decrypts, rekey_io too.
    key = agefast.x25519.Identity.generate()
    content = agefast.encrypt(PLAINTEXT, [key.to_public()]) if function != "encrypt_io" else PLAINTEXT
    if kind == "BytesIO":
        both = io.BytesIO(content)
    else:
        (tmp_path / "f").write_bytes(content)
        with open(tmp_path / "f", "r+b") as f:
            both = mmap.mmap(f.fileno(), 0)
    arguments = {"encrypt_io": [[key.to_public()]], "decrypt_io": [[key]],
                 "rekey_io": [[key], [key.to_public()]]}[function]
    with pytest.raises(errors.SameFileError):
        getattr(agefast, function)(both, both, *arguments)
    assert (both[:] if kind == "mmap" else both.getvalue()) == content
    both.close()


def test_a_duplex_stream_reads_and_writes_apart():
    # One object whose reads and writes are two channels (a socket's file) is no file read while written.
    ours, peer = socket.socketpair()
    with ours, peer, ours.makefile("rwb") as both:
        peer.sendall(PLAINTEXT)
        peer.shutdown(socket.SHUT_WR)
        agefast.encrypt_io(both, both, [RECIPIENT])
        both.flush()
        ours.shutdown(socket.SHUT_WR)
        with peer.makefile("rb") as sealed:
            assert agefast.decrypt(sealed.read(), [IDENTITY]) == PLAINTEXT


def test_a_terminal_or_pipe_on_both_sides_is_not_the_same_file():
    # Only regular files are compared: stdin and stdout are often one tty.
    read_end, write_end = os.pipe()
    with open(read_end, "rb") as src, open(write_end, "wb") as dst:
        dst.write(b"x")
        dst.flush()
        agefast._arguments.distinct_files(src, dst)


CT = agefast.encrypt(b"x", [RECIPIENT])


@pytest.mark.parametrize("call", [
    lambda out: agefast.encrypt_io("test", out, [RECIPIENT]),
    lambda out: agefast.encrypt_io(io.StringIO("text"), out, [RECIPIENT]),
    lambda out: agefast.encrypt_io(io.BytesIO(b"x"), out, [IDENTITY]),
    lambda out: agefast.encrypt_io(io.BytesIO(b"x"), out, RECIPIENT),
    lambda out: agefast.encrypt_io(io.BytesIO(b"x"), out, [RECIPIENT], armored="no"),
    lambda out: agefast.encryptor(out, [IDENTITY]),
    lambda out: agefast.encryptor(out, [RECIPIENT], armored=1),
    lambda out: agefast.decrypt_io("test", out, [IDENTITY]),
    lambda out: agefast.decrypt_io(io.BytesIO(CT), out, [RECIPIENT]),
    lambda out: agefast.decrypt_io(io.BytesIO(CT), out, IDENTITY),
], ids=["str reader", "text reader", "identity as recipient", "one recipient, not a list", "armored str",
        "encryptor of an identity", "encryptor armored int", "decrypt str reader", "recipient as identity",
        "one identity, not a list"])
def test_wrong_types_are_refused_before_anything_is_written(call):
    out = io.BytesIO()
    with pytest.raises(TypeError):
        call(out)
    assert out.getvalue() == b""


@pytest.mark.parametrize("make", [tempfile.NamedTemporaryFile, tempfile.SpooledTemporaryFile])
def test_tempfile_text_files_are_refused_before_anything_is_written(make):
    # They are no io.TextIOBase: as a reader one had met a str where bytes were read, after the header was
    # written (found by a probe of the API).
    out = io.BytesIO()
    with make(mode="w+") as text:
        text.write("text")
        text.seek(0)
        with pytest.raises(TypeError, match="binary file object"):
            agefast.encrypt_io(text, out, [RECIPIENT])
        with pytest.raises(TypeError, match="binary file object"):
            agefast.encrypt_io(io.BytesIO(b"x"), text, [RECIPIENT])
    assert out.getvalue() == b""


@pytest.mark.parametrize("error,make", [
    (ValueError, lambda: _closed(io.BytesIO(b"x"))),
    (io.UnsupportedOperation, lambda: open(os.devnull, "wb")),
], ids=["closed", "write-only"])
def test_a_reader_that_cannot_be_read_is_refused_before_the_header_is_written(error, make):
    # encrypt_io writes the header before its first read: the reader's error came after it (found by a probe).
    out, reader = io.BytesIO(), make()
    with pytest.raises(error):
        agefast.encrypt_io(reader, out, [RECIPIENT])
    assert out.getvalue() == b""
    reader.close()


def _closed(f):
    f.close()
    return f


@pytest.mark.parametrize("make", [tempfile.NamedTemporaryFile, tempfile.SpooledTemporaryFile])
def test_tempfile_binary_files_still_pass(make):
    with make(mode="w+b") as src, make(mode="w+b") as dst:
        src.write(b"plaintext")
        src.seek(0)
        agefast.encrypt_io(src, dst, [RECIPIENT])
        dst.seek(0)
        assert agefast.decrypt(dst.read(), [IDENTITY]) == b"plaintext"


@pytest.mark.parametrize("call", [
    lambda: agefast.encrypt_io(io.BytesIO(b"x"), "test", [RECIPIENT]),
    lambda: agefast.encrypt_io(io.BytesIO(b"x"), io.StringIO(), [RECIPIENT]),
    lambda: agefast.decrypt_io(io.BytesIO(CT), "test", [IDENTITY]),
    lambda: agefast.encryptor("test", [RECIPIENT]),
    lambda: agefast.decryptor("test", [IDENTITY]),
    lambda: agefast.encrypt("text", [RECIPIENT]),
    lambda: agefast.encrypt(b"x", [IDENTITY]),
    lambda: agefast.encrypt(b"x", [RECIPIENT], armored="yes"),
    lambda: agefast.decrypt("text", [IDENTITY]),
    lambda: agefast.decrypt(CT, [RECIPIENT]),
    lambda: agefast.encrypt_into(b"x", [IDENTITY], bytearray(1000)),
    lambda: agefast.decrypt_into(CT, [RECIPIENT], bytearray(1000)),
])
def test_wrong_types_are_type_errors(call):
    with pytest.raises(TypeError):
        call()


@pytest.mark.parametrize("call, name", [
    (lambda strided, buf: agefast.encrypt(strided, [RECIPIENT]), "plaintext"),
    (lambda strided, buf: agefast.decrypt(strided, [IDENTITY]), "ciphertext"),
    (lambda strided, buf: agefast.encrypt_into(strided, [RECIPIENT], buf), "plaintext"),
    (lambda strided, buf: agefast.encrypt_into(b"x", [RECIPIENT], strided), "buf"),
    (lambda strided, buf: agefast.decrypt_into(CT, [IDENTITY], strided), "buf"),
    (lambda strided, buf: agefast.decrypt_into(CT, [IDENTITY], bytes(1000)), "buf"),
    (lambda strided, buf: agefast.encryptor(io.BytesIO(), [RECIPIENT]).write(strided), "data"),
])
def test_a_buffer_that_will_not_do_is_a_type_error_naming_it(call, name):
    # A strided view had failed in memoryview.cast, its message naming neither the argument nor what was wrong.
    strided = memoryview(bytearray(2000))[::2]
    with pytest.raises(TypeError, match=f"argument '{name}'"):
        call(strided, bytearray(1000))


def test_an_empty_buffer_of_any_shape_is_empty_input():
    # memoryview refuses to cast a view with a 0 in its shape: an empty batch of a 2-D array was a TypeError.
    import numpy as np

    empty = np.zeros((0, 2), np.float32)
    assert agefast.decrypt(agefast.encrypt(empty, [RECIPIENT]), [IDENTITY]) == b""
    out = io.BytesIO()
    with agefast.encryptor(out, [RECIPIENT]) as writer:
        assert writer.write(empty) == 0
    assert agefast.decrypt(out.getvalue(), [IDENTITY]) == b""
    assert agefast.decrypt_into(agefast.encrypt(b"", [RECIPIENT]), [IDENTITY], np.zeros((0, 3))) == 0


def test_a_refused_decryptor_leaves_src_open_and_its_finaliser_nothing_to_fail_on():
    # IOBase's finaliser closes even a decryptor whose __init__ raised; close()
    # then found no `src` (AttributeError, printed as "Exception ignored" by
    # Python 3.13, and by 3.11 in development mode), or closed the caller's src.
    script = ("import gc, io, agefast\n"
              "key = agefast.x25519.Identity.generate()\n"
              "for src, identities in (('not a file', [key]), (io.BytesIO(b'x'), 'not a list')):\n"
              "    try:\n"
              "        agefast.decryptor(src, identities, close_src=True)\n"
              "    except TypeError:\n"
              "        pass\n"
              "gc.collect()\n")
    nothing_ignored(script)
    src = io.BytesIO(b"not an age file")
    with pytest.raises(errors.HeaderError):
        agefast.decryptor(src, [IDENTITY], close_src=True)
    gc.collect()
    assert not src.closed


def test_encrypt_file_refuses_bad_recipients_before_creating_anything(files, tmp_path):
    plain, sealed, listing = files
    before = listing()
    with pytest.raises(TypeError):
        agefast.encrypt_file(plain, tmp_path / "out", [IDENTITY])
    with pytest.raises(TypeError):
        agefast.decrypt_file(sealed, tmp_path / "out", [RECIPIENT])
    with pytest.raises(agefast.EncryptError):
        agefast.encrypt_file(plain, tmp_path / "out", [])
    assert listing() == before


def test_paths_may_be_str_bytes_or_pathlike(files, tmp_path):
    plain, _, _ = files
    for i, path in enumerate((str(plain), os.fsencode(plain), plain)):
        out = tmp_path / f"out{i}"
        agefast.encrypt_file(path, out, [RECIPIENT])
        agefast.decrypt_file(os.fsencode(out), str(out) + ".plain", [IDENTITY])
        assert (tmp_path / f"out{i}.plain").read_bytes() == PLAINTEXT


def test_threads_are_checked_at_every_entry_whatever_the_size():
    # Before, only the kernels' path checked them: threads=0 passed for a small file and failed for a large one,
    # and threads=10**6 started that many pipeline threads (found by this session's third probe).
    identity = agefast.x25519.Identity.generate()
    plain = bytes(200_000)
    sealed = agefast.encrypt(plain, [identity.to_public()])
    calls = [lambda t: agefast.encrypt(plain, [identity.to_public()], threads=t),
             lambda t: agefast.decrypt(sealed, [identity], threads=t),
             lambda t: agefast.encrypt_io(io.BytesIO(plain), io.BytesIO(), [identity.to_public()], threads=t),
             lambda t: agefast.decrypt_io(io.BytesIO(sealed), io.BytesIO(), [identity], threads=t),
             lambda t: agefast.decryptor(io.BytesIO(sealed), [identity], threads=t).read()]
    for call in calls:
        for bad, error in ((0, ValueError), (-1, ValueError), (True, TypeError), (2.5, TypeError), ("2", TypeError)):
            with pytest.raises(error, match="threads must be"):
                call(bad)
        call(10**6)     # as many as MAX_THREADS


def test_one_key_where_a_list_is_expected_is_named_plainly():
    # "expected a list of an identitys", "a list of a recipients" had been the words.
    identity = agefast.x25519.Identity.generate()
    with pytest.raises(TypeError, match=r"^argument 'recipients': expected a list of recipients, not "):
        agefast.encrypt(b"x", identity.to_public())
    with pytest.raises(TypeError, match=r"^argument 'identities': expected a list of identities, not "):
        agefast.decrypt(agefast.encrypt(b"x", [identity.to_public()]), identity)


@pytest.mark.parametrize("make", [
    lambda p: agefast.passphrase.encrypt(b"x", p),
    lambda p: agefast.passphrase.decrypt(agefast.encrypt(b"x", [agefast.passphrase.Recipient("pw", 2)]), p),
    lambda p: agefast.passphrase.Recipient(p),
    lambda p: agefast.passphrase.Identity(p),
], ids=["encrypt", "decrypt", "Recipient", "Identity"])
@pytest.mark.parametrize("bad", [0, 1234, [1, 2], None], ids=["0", "1234", "list", "None"])
def test_a_passphrase_is_a_str_or_bytes(make, bad):
    # bytes() had taken anything: 0 became the empty passphrase, 1234 as many zero bytes (as pyrage, a TypeError).
    with pytest.raises(TypeError, match="a passphrase must be a str or bytes"):
        make(bad)


def test_a_passphrase_of_any_bytes_like_is_its_bytes():
    sealed = agefast.encrypt(b"x", [agefast.passphrase.Recipient("pass", 2)])
    for same in (b"pass", bytearray(b"pass"), memoryview(b"pass")):
        assert agefast.decrypt(sealed, [agefast.passphrase.Identity(same)]) == b"x"
