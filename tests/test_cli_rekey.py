"""agefast-rekey and agefast.rekey: the same payload under a new header for
new recipients, copied byte for byte, opened by Go age; a file no identity
opens, or a recipient set age refuses, leaves the input as it was."""

import io
import errno
import os
import subprocess
import sys

import pytest

import agefast
import agefast.rekeying
from agefast.payload.rules import CHUNK_SIZE
from agefast.errors import EncryptError

REKEY = [sys.executable, "-m", "agefast.cli.rekey"]
PLAINTEXT = bytes(range(256)) * (3 * CHUNK_SIZE // 256) + b"end"
ARMOR_BEGIN = b"-----BEGIN AGE ENCRYPTED FILE-----\n"


def run_rekey(*args, **kwargs):
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("timeout", 120)
    if "input" not in kwargs:
        kwargs["stdin"] = subprocess.DEVNULL
    return subprocess.run([*REKEY, *map(str, args)], **kwargs)


def split_header(data: bytes) -> tuple[bytes, bytes]:
    """(header, payload) of a binary age file: the header ends with the MAC line."""
    end = data.index(b"\n", data.index(b"\n--- ") + 1) + 1
    return data[:end], data[end:]


def key_file(tmp_path, name, identity) -> str:
    path = tmp_path / name
    path.write_text(f"{identity}\n")
    return str(path)


@pytest.fixture
def keys(tmp_path):
    """Two identities, "old" (the file's) and "new", with their key files."""
    old, new = agefast.x25519.Identity.generate(), agefast.x25519.Identity.generate()
    return {"old": old, "new": new, "old_file": key_file(tmp_path, "old.txt", old),
            "new_file": key_file(tmp_path, "new.txt", new)}


def encrypted_file(tmp_path, recipients, armored=False):
    path = tmp_path / "file.age"
    path.write_bytes(agefast.encrypt(PLAINTEXT, recipients, armored=armored))
    return path


def assert_nothing_changed(path, before):
    """The input holds what it held, and no other file (a partial output) is beside it."""
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir() if p.suffix not in (".txt",)) == [path.name]


@pytest.mark.requires_tool("age")
def test_rekeyed_file_opens_with_the_new_identity_in_go_age(tmp_path, keys):
    src = encrypted_file(tmp_path, [keys["old"].to_public()])
    out = tmp_path / "out.age"
    done = run_rekey("-i", keys["old_file"], "-r", keys["new"].to_public(), "-o", out, src)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    go = subprocess.run(["age", "-d", "-i", keys["new_file"], out], capture_output=True, timeout=60)
    assert (go.returncode, go.stdout) == (0, PLAINTEXT), go.stderr
    assert agefast.decrypt(out.read_bytes(), [keys["new"]]) == PLAINTEXT
    # Exactly the given recipients: the old identity no longer opens it.
    with pytest.raises(agefast.DecryptError, match="no identity matched"):
        agefast.decrypt(out.read_bytes(), [keys["old"]])
    old_header, old_payload = split_header(src.read_bytes())
    new_header, new_payload = split_header(out.read_bytes())
    assert new_payload == old_payload
    assert new_header != old_header


@pytest.mark.requires_tool("age", "age-keygen")
def test_go_age_file_rekeyed_for_go_age(tmp_path, age_key, keys):
    """A file Go age wrote, re-keyed from a key age-keygen made, opens in Go age."""
    path, recipient = age_key
    plain = tmp_path / "plain"
    plain.write_bytes(PLAINTEXT)
    src = tmp_path / "go.age"
    subprocess.run(["age", "-r", recipient, "-o", src, plain], check=True, timeout=60)
    done = run_rekey("-i", path, "-e", "-r", keys["new"].to_public(), src)
    assert done.returncode == 0, done.stderr
    assert split_header(done.stdout)[1] == split_header(src.read_bytes())[1]
    for identity_file in (path, keys["new_file"]):    # -e kept the old identity
        go = subprocess.run(["age", "-d", "-i", identity_file], input=done.stdout, capture_output=True, timeout=60)
        assert (go.returncode, go.stdout) == (0, PLAINTEXT), go.stderr


def test_output_may_be_input(tmp_path, keys):
    src = encrypted_file(tmp_path, [keys["old"].to_public()])
    payload = split_header(src.read_bytes())[1]
    src.chmod(0o640)
    done = run_rekey("-i", keys["old_file"], "-r", keys["new"].to_public(), "-o", src, src)
    assert done.returncode == 0, done.stderr
    assert agefast.decrypt(src.read_bytes(), [keys["new"]]) == PLAINTEXT
    assert split_header(src.read_bytes())[1] == payload
    assert src.stat().st_mode & 0o777 == 0o640     # replaced as agefast -o replaces: the mode stays
    assert_nothing_changed(src, src.read_bytes())



@pytest.mark.parametrize("mode", ["r+b", "ab"])      # `1<> INPUT`, `>> INPUT`
@pytest.mark.parametrize("extra", [[], ["-e"]])      # a new header of the same length, or a longer one
def test_standard_output_that_is_the_input_is_refused(tmp_path, keys, mode, extra):
    # The copy wrote over the payload it read (or after it), and then said the input was left as it was.
    src = encrypted_file(tmp_path, [keys["old"].to_public()])
    before = src.read_bytes()
    with open(src, mode) as stdout:
        done = run_rekey("-i", keys["old_file"], *extra, "-r", keys["new"].to_public(), src, stdout=stdout,
                         capture_output=False, stderr=subprocess.PIPE)
    assert done.returncode == 1 and b"the input and the output are the same file" in done.stderr
    assert_nothing_changed(src, before)


def test_in_place_where_the_folder_takes_no_new_file_is_refused(refusing_folder, keys):
    # agefast -o writes such an OUTPUT in place, as age does; agefast-rekey's OUTPUT may be its INPUT, whose
    # payload emptying it first would lose.
    src = refusing_folder / "out"
    src.write_bytes(agefast.encrypt(PLAINTEXT, [keys["old"].to_public()]))
    before = src.read_bytes()
    done = run_rekey("-i", keys["old_file"], "-r", keys["new"].to_public(), "-o", src, src)
    assert done.returncode == 1 and b"failed to open output file" in done.stderr, done.stderr
    assert_nothing_changed(src, before)

@pytest.mark.parametrize("output", ["same", "other", "stdout"])
def test_without_a_matching_identity_nothing_is_written(tmp_path, keys, output):
    src = encrypted_file(tmp_path, [keys["old"].to_public()])
    before = src.read_bytes()
    where = {"same": ["-o", src], "other": ["-o", tmp_path / "out.age"], "stdout": []}[output]
    done = run_rekey("-i", keys["new_file"], "-r", keys["new"].to_public(), *where, src)
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.startswith(b"agefast-rekey: error: ")
    assert b"no identity matched any of the recipients" in done.stderr
    assert_nothing_changed(src, before)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("command", ["rekey", "encrypt", "encrypt -a"])
def test_a_full_device_as_output_is_named(tmp_path, keys, command):
    # A device is written through a buffer: its close flushed the rest, failed again, and that error (naming
    # no file) replaced the write's, which named it.
    if command == "rekey":
        src = encrypted_file(tmp_path, [keys["old"].to_public()])
        done = run_rekey("-i", keys["old_file"], "-r", keys["new"].to_public(), "-o", "/dev/full", src)
    else:
        done = subprocess.run([sys.executable, "-m", "agefast", *command.split()[1:], "-r", str(keys["new"].to_public()),
                               "-o", "/dev/full"], input=b"small", capture_output=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.endswith(b'error: failed to write output file "/dev/full": No space left on device\n')


def test_a_modified_header_is_refused(tmp_path, keys):
    """The header MAC is checked with the recovered file key before anything is written."""
    src = encrypted_file(tmp_path, [keys["old"].to_public(), keys["new"].to_public()])
    data = src.read_bytes()
    header, payload = split_header(data)
    # Drop the second stanza (its line and its body line): the MAC no longer matches.
    lines = header.split(b"\n")
    assert lines[3].startswith(b"-> X25519 ") and lines[5].startswith(b"--- ")
    src.write_bytes(b"\n".join(lines[:3] + lines[5:]) + payload)
    before = src.read_bytes()
    done = run_rekey("-i", keys["old_file"], "-r", keys["new"].to_public(), "-o", src, src)
    assert done.returncode == 1
    assert b"header MAC does not match" in done.stderr
    assert_nothing_changed(src, before)


def test_armored_in_armored_out(tmp_path, keys):
    src = encrypted_file(tmp_path, [keys["old"].to_public()], armored=True)
    done = run_rekey("-i", keys["old_file"], "-r", keys["new"].to_public(), src)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(ARMOR_BEGIN) and done.stdout.endswith(b"-----END AGE ENCRYPTED FILE-----\n")
    assert agefast.decrypt(done.stdout, [keys["new"]]) == PLAINTEXT
    # The armor is made anew; what it holds is the same payload.
    old_payload = split_header(_unarmored(src.read_bytes()))[1]
    assert split_header(_unarmored(done.stdout))[1] == old_payload


def _unarmored(data: bytes) -> bytes:
    import base64

    lines = data.strip().split(b"\n")
    return base64.b64decode(b"".join(lines[1:-1]))


def test_binary_through_pipes(keys):
    """Standard input and output are pipes: the payload is copied through a buffer."""
    data = agefast.encrypt(PLAINTEXT, [keys["old"].to_public()])
    done = run_rekey("-i", keys["old_file"], "-r", keys["new"].to_public(), input=data)
    assert done.returncode == 0, done.stderr
    assert split_header(done.stdout)[1] == split_header(data)[1]
    assert agefast.decrypt(done.stdout, [keys["new"]]) == PLAINTEXT


@pytest.mark.parametrize("second", ["x25519", "passphrase"])
def test_post_quantum_and_passphrase_mixing_is_refused(tmp_path, keys, second):
    pq = agefast.pq.Identity.generate()
    src = encrypted_file(tmp_path, [keys["old"].to_public()])
    before = src.read_bytes()
    if second == "x25519":
        args = ["-r", pq.to_public(), "-r", keys["new"].to_public()]
        message = b"can't mix post-quantum and classic recipients, or the file would be vulnerable to quantum computers"
    else:
        # -e -j batchpass: the passphrase of $AGE_PASSPHRASE, beside an X25519 key.
        args = ["-j", "batchpass", "-e", "-r", keys["new"].to_public()]
        message = b"a passphrase must be the only recipient of a file"
    env = {**os.environ, "AGE_PASSPHRASE": "pw", "AGE_PASSPHRASE_WORK_FACTOR": "2"}
    done = run_rekey("-i", keys["old_file"], *args, "-o", src, src, env=env)
    assert done.returncode == 1
    assert b"incompatible recipients" in done.stderr and message in done.stderr, done.stderr
    assert_nothing_changed(src, before)


def test_post_quantum_rekey(tmp_path, keys):
    """A classic file re-keyed to post-quantum recipients only is allowed."""
    pq = agefast.pq.Identity.generate()
    src = encrypted_file(tmp_path, [keys["old"].to_public()])
    done = run_rekey("-i", keys["old_file"], "-r", pq.to_public(), src)
    assert done.returncode == 0, done.stderr
    assert agefast.decrypt(done.stdout, [pq]) == PLAINTEXT


def test_passphrase_file_opened_by_batchpass(tmp_path, keys):
    env = {**os.environ, "AGE_PASSPHRASE": "secret", "AGE_PASSPHRASE_WORK_FACTOR": "2"}
    src = tmp_path / "file.age"
    src.write_bytes(agefast.encrypt(PLAINTEXT, [agefast.passphrase.Recipient("secret", work_factor=2)]))
    done = run_rekey("-j", "batchpass", "-r", keys["new"].to_public(), src, env=env)
    assert done.returncode == 0, done.stderr
    assert agefast.decrypt(done.stdout, [keys["new"]]) == PLAINTEXT


def test_passphrase_prompts_old_then_new(tmp_path, keys, tty_run):
    src = tmp_path / "file.age"
    src.write_bytes(agefast.encrypt(PLAINTEXT, [agefast.passphrase.Recipient("old", work_factor=2)]))
    replies = [(b"Enter passphrase:", "old"), (b"Enter passphrase (leave empty", "new"),
               (b"Confirm passphrase", "new")]
    done = tty_run([*REKEY, "-p", "-o", src, src], replies)
    assert done.returncode == 0, done.transcript
    assert agefast.decrypt(src.read_bytes(), [agefast.passphrase.Identity("new")]) == PLAINTEXT


@pytest.mark.parametrize(("args", "message"), [
    ([], "missing recipients"),
    (["-e"], "-e/--encrypt needs identities"),
    (["-p", "-r", "age1x"], "-p/--passphrase can't be combined with -r/--recipient"),
    (["-i", "KEY", "-e", "-p"], "-p/--passphrase can't be combined with -e/--encrypt"),
    (["-r", "age1x", "a", "b"], "too many INPUT arguments"),
    (["-i", "KEY", "-r", "age1x", "-o", "KEY"], "input and output file are the same"),
    (["-i", "/nonexistent/key.txt", "-e"], 'failed to open identity file "/nonexistent/key.txt": No such file'),
    (["-i", "KEY", "-e", "/nonexistent/in.age"], 'failed to open input file "/nonexistent/in.age": No such file'),
])
def test_flag_errors(tmp_path, keys, args, message):
    args = [keys["old_file"] if a == "KEY" else a for a in args]
    done = run_rekey(*args)
    assert done.returncode == 1
    assert done.stderr.decode().startswith(f"agefast-rekey: error: {message}")
    assert (tmp_path / "old.txt").read_text() == f"{keys['old']}\n"


def test_flags_after_input_get_agefasts_hints():
    # As agefast (and age): the flags after INPUT are not read, and the hints say where INPUT goes.
    done = run_rekey("f.age", "-i", "k.txt", "-r", "age1x")
    assert done.returncode == 1
    assert done.stderr.decode().splitlines()[1:] == [
        "agefast-rekey: hint: the input file must be specified after all flags",
        "agefast-rekey: hint: did you mean:",
        "agefast-rekey: hint:     agefast-rekey -i k.txt -r age1x f.age"]


def test_help_says_what_it_does_not_do():
    done = run_rekey("-h")
    assert done.returncode == 0
    text = " ".join(done.stderr.decode().split())
    assert "the file key stays the same" in text
    assert "To take someone's access away, decrypt the file and encrypt it anew" in text


def test_library_rekey_and_rekey_io(tmp_path, keys):
    src = encrypted_file(tmp_path, [keys["old"].to_public()])
    payload = split_header(src.read_bytes())[1]
    agefast.rekey(src, src, [keys["old"]], [keys["new"].to_public()])
    assert split_header(src.read_bytes())[1] == payload
    out = io.BytesIO()
    agefast.rekey_io(io.BytesIO(src.read_bytes()), out, [keys["new"]], [keys["old"].to_public()])
    assert split_header(out.getvalue())[1] == payload
    assert agefast.decrypt(out.getvalue(), [keys["old"]]) == PLAINTEXT
    with pytest.raises(EncryptError, match="incompatible recipients"):
        agefast.rekey(src, tmp_path / "never", [keys["new"]],
                      [agefast.passphrase.Recipient("pw", work_factor=2), keys["old"].to_public()])
    assert not (tmp_path / "never").exists()


@pytest.fixture
def kernel_copies(monkeypatch):
    """The calls of os.copy_file_range made meanwhile, as (src offset, dst offset)."""
    if not hasattr(os, "copy_file_range"):
        pytest.skip("copy_file_range is Linux's")
    calls = []
    real = os.copy_file_range

    def counting(src, dst, count, offset_src=None, offset_dst=None):
        calls.append((offset_src, offset_dst))
        return real(src, dst, count, offset_src, offset_dst)

    monkeypatch.setattr(os, "copy_file_range", counting)
    return calls


def test_rekey_io_between_files_at_offsets(tmp_path, keys, kernel_copies):
    """An age file inside a larger file, onto a file that holds something already:
    the kernel copies from and to the right offsets, the output's 64 KiB-aligned
    (so that file systems with reflinks can share the blocks, and the page
    cache takes the copy in large folios)."""
    data = agefast.encrypt(PLAINTEXT, [keys["old"].to_public()])
    (tmp_path / "in").write_bytes(b"prefix" * 1000 + data)
    (tmp_path / "out").write_bytes(b"kept")
    with open(tmp_path / "in", "rb") as src, open(tmp_path / "out", "r+b") as dst:
        src.seek(6000)
        dst.seek(4)
        agefast.rekey_io(src, dst, [keys["old"]], [keys["new"].to_public()])
    out = (tmp_path / "out").read_bytes()
    assert out.startswith(b"kept") and split_header(out[4:])[1] == split_header(data)[1]
    assert agefast.decrypt(out[4:], [keys["new"]]) == PLAINTEXT
    payload_in = 6000 + len(split_header(data)[0])
    payload_out = 4 + len(split_header(out[4:])[0])
    src_at, dst_at = kernel_copies[0]
    assert dst_at % (1 << 16) == 0 and dst_at % os.stat(tmp_path / "out").st_blksize == 0
    assert src_at - payload_in == dst_at - payload_out > 0


def test_rekey_io_from_a_file_object_with_its_own_offsets(tmp_path, keys, kernel_copies):
    """A GzipFile has the descriptor of its compressed file: its payload is read, not copied by offset."""
    import gzip

    data = agefast.encrypt(PLAINTEXT, [keys["old"].to_public()])
    with gzip.open(tmp_path / "in.gz", "wb") as f:
        f.write(data)
    with gzip.open(tmp_path / "in.gz", "rb") as src, open(tmp_path / "out", "wb") as dst:
        agefast.rekey_io(src, dst, [keys["old"]], [keys["new"].to_public()])
    assert kernel_copies == []
    assert split_header((tmp_path / "out").read_bytes())[1] == split_header(data)[1]


def test_files_the_kernel_cannot_copy_between(tmp_path, keys, monkeypatch):
    """copy_file_range refusing the pair (EXDEV: another file system, on some
    kernels) leaves the copy to the buffer, over the head already written."""
    import errno

    def refuse(*args):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    monkeypatch.setattr(os, "copy_file_range", refuse, raising=False)    # or where the system has none
    src = encrypted_file(tmp_path, [keys["old"].to_public()])
    agefast.rekey(src, tmp_path / "out", [keys["old"]], [keys["new"].to_public()])
    out = (tmp_path / "out").read_bytes()
    assert split_header(out)[1] == split_header(src.read_bytes())[1]
    assert agefast.decrypt(out, [keys["new"]]) == PLAINTEXT


@pytest.fixture
def written_meanwhile(monkeypatch):
    """Append "more" to `path` while its payload is copied."""
    import agefast.io.copy

    def start(path):
        real = agefast.io.copy.copy_rest

        def copying(*args):
            real(*args)
            with open(path, "ab") as writer:
                writer.write(b"more")
        monkeypatch.setattr(agefast.rekeying, "copy_rest", copying)
    return start


@pytest.mark.parametrize("armored", [False, True])
@pytest.mark.parametrize("in_place", [True, False])
def test_an_input_written_meanwhile_is_left_as_the_writer_leaves_it(tmp_path, keys, written_meanwhile, in_place,
                                                                     armored):
    """A writer appending to the input during the copy: the copy is dropped, not renamed over what it wrote."""
    src = encrypted_file(tmp_path, [keys["old"].to_public()], armored)
    written_meanwhile(src)
    before = src.read_bytes()
    target = src if in_place else tmp_path / "out.age"
    with pytest.raises(EncryptError, match="the input changed while it was re-keyed"):
        agefast.rekey(src, target, [keys["old"]], [keys["new"].to_public()])
    assert_nothing_changed(src, before + b"more")


def test_an_input_written_while_the_result_is_synced_is_left_as_the_writer_leaves_it(tmp_path, keys,
                                                                                     written_while_synced):
    # The sync of a large result takes seconds, and the input was checked before it: a record appended then
    # was dropped by the rename, and the run succeeded.
    src = encrypted_file(tmp_path, [keys["old"].to_public()])
    before = src.read_bytes()
    written_while_synced(src)
    with pytest.raises(EncryptError, match="the input changed while it was re-keyed"):
        agefast.rekey(src, src, [keys["old"]], [keys["new"].to_public()])
    assert_nothing_changed(src, before + b"more")


def test_a_sync_that_fails_replaces_nothing(tmp_path, keys, monkeypatch):
    # The kernel tells a writeback error once: the first sync's EIO had been swallowed, and the rename's own
    # sync, finding nothing wrong, replaced the only copy with a result that may not be on the disk.
    src = encrypted_file(tmp_path, [keys["old"].to_public()])
    before = src.read_bytes()
    sync = os.fsync

    def failing_once(fd):
        monkeypatch.setattr(os, "fsync", sync)
        raise OSError(errno.EIO, os.strerror(errno.EIO))
    monkeypatch.setattr(os, "fsync", failing_once)
    with pytest.raises(OSError) as failed:
        agefast.rekey(src, src, [keys["old"]], [keys["new"].to_public()])
    assert failed.value.errno == errno.EIO
    assert_nothing_changed(src, before)


def test_the_command_leaves_an_input_written_meanwhile(tmp_path, keys, written_meanwhile, capsys):
    from agefast.cli import rekey

    src = encrypted_file(tmp_path, [keys["old"].to_public()])
    written_meanwhile(src)
    before = src.read_bytes()
    assert rekey.main(["-i", keys["old_file"], "-r", str(keys["new"].to_public()), "-o", str(src), str(src)]) == 1
    assert "the input changed while it was re-keyed: left as it is" in capsys.readouterr().err
    assert_nothing_changed(src, before + b"more")


def test_a_file_powershell_redirected_is_told_with_age_s_hints(tmp_path, keys):
    # As agefast -d tells it; the rekey had said "invalid header: invalid header intro: ..." with no hints.
    src = tmp_path / "crlf.age"
    src.write_bytes(agefast.encrypt(b"x", [keys["old"].to_public()]).replace(b"\n", b"\r\n"))
    done = run_rekey("-i", keys["old_file"], "-r", keys["new"].to_public(), "-o", tmp_path / "out.age", src)
    assert done.returncode == 1 and not (tmp_path / "out.age").exists()
    assert done.stderr.decode().splitlines() == [
        "agefast-rekey: error: invalid header intro",
        "agefast-rekey: hint: it looks like this file was corrupted by PowerShell redirection",
        "agefast-rekey: hint: consider using -o or -a to encrypt files in PowerShell"]
