"""The agefast command never destroys an input: no input or key file is ever
overwritten, -o writes through symlinks, and a killed run leaves no file.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

import agefast
from unnamed_files import require_unnamed_files

AGEFAST = [sys.executable, "-m", "agefast"]


@pytest.fixture
def key(tmp_path):
    """An identity file, its text, and its recipient."""
    identity = agefast.x25519.Identity.generate()
    path = tmp_path / "key.txt"
    path.write_text(f"{identity}\n")
    return path, path.read_bytes(), str(identity.to_public())


def _refused(done, *untouched) -> None:
    assert done.returncode == 1, done.stderr
    assert b"input and output file are the same" in done.stderr, done.stderr
    for path, contents in untouched:
        assert path.read_bytes() == contents


@pytest.mark.parametrize("spelling", ["{name}", "./{name}", "sub/../{name}"])
def test_encrypt_onto_its_input(spelling, tmp_path, key, run_agefast):
    _, _, recipient = key
    src = tmp_path / "input"
    src.write_bytes(b"precious")
    (tmp_path / "sub").mkdir()
    done = run_agefast("-r", recipient, "-o", spelling.format(name="input"), "input", cwd=tmp_path)
    _refused(done, (src, b"precious"))


def test_one_terminal_as_input_and_output_is_no_file_written_over(tmp_path):
    # `-o /dev/stdout /dev/stdin` on a terminal had been refused as the input written over: both name the one
    # terminal. As age compares them, by path, and as files only where they are regular files.
    from agefast.cli.output import OutputRefused, refuse_output_onto_an_input

    master, slave = os.openpty()
    try:
        terminal = os.ttyname(slave)
        (tmp_path / "out").symlink_to(terminal)
        refuse_output_onto_an_input(str(tmp_path / "out"), [terminal])
    finally:
        os.close(master)
        os.close(slave)
    (tmp_path / "file").write_bytes(b"input")
    (tmp_path / "link").symlink_to(tmp_path / "file")
    with pytest.raises(OutputRefused, match="input and output file are the same"):
        refuse_output_onto_an_input(str(tmp_path / "link"), [str(tmp_path / "file")])


def test_decrypt_onto_its_input(tmp_path, key, run_agefast):
    key_path, _, recipient = key
    src = tmp_path / "file.age"
    ciphertext = agefast.encrypt(b"secret", [agefast.x25519.Recipient.from_str(recipient)])
    src.write_bytes(ciphertext)
    _refused(run_agefast("-d", "-i", key_path, "-o", src, src), (src, ciphertext))


def test_decrypt_onto_the_identity_file(tmp_path, key, run_agefast):
    """The case that used to replace the key with the plaintext."""
    key_path, key_text, recipient = key
    ciphertext = agefast.encrypt(b"secret", [agefast.x25519.Recipient.from_str(recipient)])
    src = tmp_path / "file.age"
    src.write_bytes(ciphertext)
    _refused(run_agefast("-d", "-i", key_path, "-o", key_path, src), (key_path, key_text))


def test_encrypt_onto_the_identity_file(tmp_path, key, run_agefast):
    key_path, key_text, _ = key
    _refused(run_agefast("-e", "-i", key_path, "-o", key_path, input=b"data"), (key_path, key_text))


def test_encrypt_onto_the_recipients_file(tmp_path, key, run_agefast):
    _, _, recipient = key
    recipients = tmp_path / "recipients.txt"
    recipients.write_text(f"{recipient}\n")
    _refused(run_agefast("-R", recipients, "-o", recipients, input=b"data"),
             (recipients, recipients.read_bytes()))


def test_passphrase_onto_its_input_refused_before_prompting(tmp_path, run_agefast):
    """Refused before the passphrase prompt, so no terminal is needed to see it."""
    src = tmp_path / "input"
    src.write_bytes(b"precious")
    _refused(run_agefast("-p", "-o", src, src), (src, b"precious"))


@pytest.mark.parametrize("link_to", ["input", "key"])
def test_output_through_a_symlink_to_an_input(link_to, tmp_path, key, run_agefast):
    key_path, key_text, _ = key
    src = tmp_path / "input"
    src.write_bytes(b"precious")
    link = tmp_path / "link"
    link.symlink_to(src if link_to == "input" else key_path)
    done = run_agefast("-e", "-i", key_path, "-o", link, src)
    _refused(done, (src, b"precious"), (key_path, key_text))
    assert link.is_symlink()


def test_output_through_a_hard_link_to_an_input(tmp_path, key, run_agefast):
    key_path, key_text, _ = key
    link = tmp_path / "hard"
    os.link(key_path, link)
    _refused(run_agefast("-e", "-i", key_path, "-o", link, input=b"data"), (key_path, key_text))


def test_output_to_a_fifo_writes_into_it(tmp_path, key):
    # A rename over a FIFO would swap the node for a regular file.
    key_path, _, recipient = key
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    read_end = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        done = subprocess.run([*AGEFAST, "-r", recipient, "-o", str(fifo)], input=b"into a pipe",
                              capture_output=True, timeout=60)
        got = os.read(read_end, 1 << 20)
    finally:
        os.close(read_end)
    assert done.returncode == 0, done.stderr
    assert fifo.is_fifo()
    assert agefast.decrypt(got, agefast.parse_identities(key_path.read_text())) == b"into a pipe"


@pytest.mark.skipif(not os.path.exists("/dev/fd"), reason="no /dev/fd on this system")
@pytest.mark.parametrize("output", ["/dev/stdout", "/dev/fd/{fd}"])
def test_output_to_a_pipe_by_a_path_writes_into_it(key, output):
    # As `age -o /dev/stdout | ...` and `age -o >(tar x)` write into the pipe: realpath() had made the path
    # /proc/PID/fd/pipe:[N], which names nothing, and the command failed to open its output.
    key_path, _, recipient = key
    read_end, write_end = os.pipe()
    try:
        done = subprocess.run([*AGEFAST, "-r", recipient, "-o", output.format(fd=write_end)], input=b"into a pipe",
                              stdout=write_end if output == "/dev/stdout" else subprocess.DEVNULL,
                              stderr=subprocess.PIPE, pass_fds=(write_end,), timeout=60)
        os.close(write_end)
        with open(read_end, "rb") as f:
            got = f.read()
    finally:
        for fd in (read_end, write_end):
            with contextlib.suppress(OSError):
                os.close(fd)
    assert done.returncode == 0, done.stderr
    assert agefast.decrypt(got, agefast.parse_identities(key_path.read_text())) == b"into a pipe"


def test_output_onto_a_symlink_writes_through_it(tmp_path, key, run_agefast):
    key_path, _, recipient = key
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out.age"
    target.write_bytes(b"old")
    target.chmod(0o600)
    link = tmp_path / "link.age"
    link.symlink_to(target)
    assert run_agefast("-r", recipient, "-o", link, input=b"new plaintext").returncode == 0
    assert link.is_symlink() and link.resolve() == target
    assert agefast.decrypt(target.read_bytes(), agefast.parse_identities(key_path.read_text())) == b"new plaintext"
    # The file keeps its own mode, as when a plain open() truncates it.
    assert target.stat().st_mode & 0o777 == 0o600
    assert sorted(os.listdir(tmp_path / "real")) == ["out.age"]


def test_output_onto_a_dangling_symlink_creates_its_target(tmp_path, key, run_agefast):
    _, _, recipient = key
    link = tmp_path / "link.age"
    link.symlink_to("target.age")
    assert run_agefast("-r", recipient, "-o", link, input=b"x").returncode == 0
    assert link.is_symlink()
    assert (tmp_path / "target.age").read_bytes().startswith(b"age-encryption.org/v1\n")


def _output_of(pid: int, directory, inputs) -> str | None:
    """/proc/PID/fd/N of a file the process has open in `directory` other
    than `inputs`: its output, with a name or without; None while it has none."""
    fds = f"/proc/{pid}/fd"
    directory = os.path.realpath(directory)
    known = {os.path.realpath(p) for p in inputs}
    with contextlib.suppress(FileNotFoundError):     # the process ended
        for n in os.listdir(fds):
            with contextlib.suppress(FileNotFoundError):     # closed meanwhile
                link = os.readlink(f"{fds}/{n}")
                # A file without a name shows as "DIRECTORY/#INODE (deleted)".
                if os.path.dirname(link) == directory and link not in known:
                    return f"{fds}/{n}"
    return None


def wait_for_output(proc, directory, inputs=(), written=0) -> None:
    """Wait until `proc` has an output open in `directory` (a file other
    than `inputs`) and has written at least `written` bytes of it."""
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, "the command ended before the moment awaited"
        output = _output_of(proc.pid, directory, inputs)
        with contextlib.suppress(FileNotFoundError):
            if output is not None and os.stat(output).st_size >= written:
                return
        assert time.monotonic() < deadline, "the output never appeared"
        time.sleep(0.002)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signal_during_output_leaves_no_file(signum, tmp_path, key):
    _, _, recipient = key
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    # The command's default disposition, even where the tests run under nohup
    # (an ignored SIGHUP is inherited, and the command keeps it ignored).
    proc = subprocess.Popen([*AGEFAST, "-r", recipient, "-o", out_dir / "file.age"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL))
    try:
        proc.stdin.write(b"x" * 100_000)  # more than a chunk: the output is being written
        proc.stdin.flush()
        wait_for_output(proc, out_dir)
        proc.send_signal(signum)
        proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.stdin.close()
        proc.stderr.close()
    assert proc.returncode != 0
    assert os.listdir(out_dir) == []
    if signum != signal.SIGINT:
        # It died of the signal, as a process without a handler would.
        assert proc.returncode == -signum


def test_ignored_sighup_stays_ignored(tmp_path, key):
    """A caller that ignores SIGHUP (nohup) keeps it ignored."""
    _, _, recipient = key
    out = tmp_path / "file.age"
    proc = subprocess.Popen([*AGEFAST, "-r", recipient, "-o", out], stdin=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        proc.stdin.write(b"x" * 100_000)
        proc.stdin.flush()
        wait_for_output(proc, tmp_path, [tmp_path / "key.txt"])
        proc.send_signal(signal.SIGHUP)
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    assert out.read_bytes().startswith(b"age-encryption.org/v1\n")


def test_decrypt_onto_the_ssh_public_key_file(tmp_path, key, run_agefast):
    """PATH.pub is read for an SSH identity -i PATH, so it is an input too."""
    key_path, _, recipient = key
    public = tmp_path / "key.txt.pub"
    public.write_text("ssh-ed25519 AAAA... kept\n")
    src = tmp_path / "file.age"
    src.write_bytes(agefast.encrypt(b"secret", [agefast.x25519.Recipient.from_str(recipient)]))
    _refused(run_agefast("-d", "-i", key_path, "-o", public, src), (public, b"ssh-ed25519 AAAA... kept\n"))


def test_decrypt_to_the_name_of_a_missing_public_key_file(tmp_path, key, run_agefast):
    # PATH.pub is read only where it exists: `-d -i key.txt -o key.txt.pub` restores a lost one, as age does it.
    # It had been refused as "input and output file are the same".
    key_path, _, recipient = key
    public = tmp_path / "key.txt.pub"
    src = tmp_path / "file.age"
    src.write_bytes(agefast.encrypt(b"ssh-ed25519 AAAA... restored\n", [agefast.x25519.Recipient.from_str(recipient)]))
    result = run_agefast("-d", "-i", key_path, "-o", public, src)
    assert result.returncode == 0, result.stderr
    assert public.read_bytes() == b"ssh-ed25519 AAAA... restored\n"


KILL_SIZE = 256 << 20
# When SIGKILL lands: bytes of the output written by then (none yet, a
# sixteenth, half), so every kill finds the command writing, however fast.
KILL_AT = (0, KILL_SIZE // 16, KILL_SIZE // 2)
# The library's file functions, run as a program of their own to kill.
LIBRARY = [sys.executable, "-c", "import sys, agefast; x = agefast.x25519\n"
           "if sys.argv[1] == 'encrypt_file':\n"
           "    agefast.encrypt_file(sys.argv[2], sys.argv[3], [x.Recipient.from_str(sys.argv[4])])\n"
           "else:\n"
           "    identity = agefast.parse_identities(open(sys.argv[4]).read())\n"
           "    agefast.rekey(sys.argv[2], sys.argv[3], identity, [x.Recipient.from_str(sys.argv[5])])\n"]


def _age_file_to_rekey(path, recipient: str) -> None:
    """An age file of KILL_SIZE: a real header and nonce, then a payload of
    zeros, made at once (re-keying checks the header only, and copies the
    payload unread)."""
    sealed = agefast.encrypt(b"", [agefast.x25519.Recipient.from_str(recipient)])
    header_end = sealed.index(b"\n", sealed.index(b"\n--- ") + 1) + 1
    path.write_bytes(sealed[:header_end + 16])
    os.truncate(path, header_end + 16 + KILL_SIZE)


@pytest.mark.parametrize("command", ["agefast -o OUT IN", "agefast -o OUT IN, OUT there", "agefast-rekey -o F F",
                                     "encrypt_file", "rekey F F"])
def test_sigkill_leaves_the_input_and_the_old_output_only(command, tmp_path, key):
    """SIGKILL, which no cleanup outlives, while the output is written leaves
    no file but what was there: the output has no name until it is whole."""
    key_path, _, recipient = key
    work = tmp_path / "work"
    work.mkdir()
    require_unnamed_files(work)
    source, out = work / "IN", work / "OUT"
    if command.startswith("agefast -o") or command == "encrypt_file":
        source.write_bytes(b"")
        os.truncate(source, KILL_SIZE)
    else:
        _age_file_to_rekey(source, recipient)
    if command in ("agefast -o OUT IN, OUT there", "encrypt_file"):
        out.write_bytes(b"the old output\n")
    argv = {"agefast -o OUT IN": [*AGEFAST, "-r", recipient, "-o", out, source],
            "agefast -o OUT IN, OUT there": [*AGEFAST, "-r", recipient, "-o", out, source],
            "agefast-rekey -o F F": [sys.executable, "-m", "agefast.cli.rekey", "-i", key_path, "-r", recipient,
                                     "-o", source, source],
            "encrypt_file": [*LIBRARY, "encrypt_file", source, out, recipient],
            "rekey F F": [*LIBRARY, "rekey", source, source, key_path, recipient]}[command]
    there = {p.name: p.read_bytes() if p.stat().st_size < 1 << 20 else None for p in work.iterdir()}
    stats = {name: os.stat(work / name) for name in there}
    for written in KILL_AT:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_for_output(proc, work, [work / name for name in there], written)
            proc.kill()
            proc.wait(timeout=60)
        finally:
            proc.kill()
            proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL
        assert sorted(os.listdir(work)) == sorted(there), f"killed after {written} bytes"
        for name, before in stats.items():
            after = os.stat(work / name)
            assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size,
                                                                        before.st_mtime_ns)
    for name, contents in there.items():
        if contents is not None:
            assert (work / name).read_bytes() == contents


def test_stdin_as_an_input_is_never_the_output(tmp_path, key, run_agefast):
    # -o /dev/stdin names the file the shell gave as standard input: with -i - (the key) or no INPUT (the data),
    # writing it would replace the key or the ciphertext.
    key_path, key_text, recipient = key
    ciphertext = agefast.encrypt(b"secret", [agefast.x25519.Recipient.from_str(recipient)])
    src = tmp_path / "file.age"
    src.write_bytes(ciphertext)
    with open(key_path, "rb") as stdin:
        _refused(run_agefast("-d", "-i", "-", "-o", "/dev/stdin", src, stdin=stdin), (key_path, key_text))
    with open(src, "rb") as stdin:
        _refused(run_agefast("-d", "-i", key_path, "-o", "/dev/stdin", stdin=stdin), (src, ciphertext))


@pytest.mark.parametrize("flag", ["-i", "-R"])
def test_a_key_file_that_never_ends_is_refused_at_once(tmp_path, key, flag, run_agefast):
    # As Go age, which reads at most 16 MiB of one: -i /dev/zero once took all of the machine's memory.
    src = tmp_path / "file.age"
    src.write_bytes(agefast.encrypt(b"secret", [agefast.x25519.Recipient.from_str(key[2])]))
    args = ("-d", "-i", "/dev/zero", src) if flag == "-i" else ("-R", "/dev/zero", "-o", tmp_path / "out", src)
    done = run_agefast(*args, timeout=60)
    assert done.returncode == 1
    purpose = "identity file" if flag == "-i" else "recipients file"
    assert done.stderr.decode() == f"agefast: error: {purpose} /dev/zero: larger than 16 MiB, which no key file is\n"
    assert not (tmp_path / "out").exists()


def test_a_comment_that_is_not_utf8_is_a_comment(tmp_path, key, run_agefast, run_keygen):
    # As Go age reads key files: only their keys must be valid; a Latin-1 comment is still a comment.
    key_path, key_text, recipient = key
    identities = tmp_path / "latin1-key.txt"
    identities.write_bytes(b"# caf\xe9\n" + key_text)
    recipients = tmp_path / "latin1-recipients.txt"
    recipients.write_bytes(b"# caf\xe9\n" + recipient.encode() + b"\n")
    src = tmp_path / "file.age"
    done = run_agefast("-R", recipients, "-o", src, input=b"secret")
    assert done.returncode == 0, done.stderr
    done = run_agefast("-d", "-i", identities, src)
    assert (done.returncode, done.stdout) == (0, b"secret"), done.stderr
    done = run_keygen("-y", identities)
    assert (done.returncode, done.stdout) == (0, recipient.encode() + b"\n"), done.stderr
    from agefast.keys import load_identities

    assert agefast.decrypt(src.read_bytes(), load_identities(identities.read_bytes())) == b"secret"


@pytest.mark.skipif(not hasattr(os, "register_at_fork"), reason="os.register_at_fork is not there, as on Windows")
def test_a_process_forked_while_a_command_runs_dies_of_sigterm_as_a_process_does(tmp_path):
    # agefast-tree's workers inherited the command's SIGTERM/SIGHUP handler, and a signal to the process group
    # printed its traceback in each of them.
    import signal

    from agefast.cli import outcome

    with outcome._cleanup_on_termination():
        assert signal.getsignal(signal.SIGTERM) is outcome._raise_terminated
        pid = os.fork()
        if pid == 0:
            os._exit(0 if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL else 1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0



def test_output_in_a_folder_that_takes_no_new_file_is_written_in_place(refusing_folder, key, run_agefast):
    # As age writes -o: its folder's permission is not needed where the file is there to open.
    key_path, _, recipient = key
    out = refusing_folder / "out"
    with pytest.raises(PermissionError):
        (refusing_folder / "probe").write_bytes(b"")
    done = run_agefast("-r", recipient, "-o", out, input=b"plaintext")
    assert done.returncode == 0, done.stderr
    assert agefast.decrypt(out.read_bytes(), [agefast.x25519.Identity.from_str(key_path.read_text().strip())]) \
        == b"plaintext"
    assert sorted(p.name for p in refusing_folder.iterdir()) == ["out"]


def test_a_failed_decryption_in_place_leaves_the_verified_prefix_as_age_does(refusing_folder, key, run_agefast,
                                                                            tmp_path):
    key_path, _, recipient = key
    plaintext = os.urandom(3 * 65536 + 100)
    sealed = bytearray(agefast.encrypt(plaintext, [agefast.x25519.Recipient.from_str(recipient)]))
    sealed[-50] ^= 1        # the last chunk's tag fails
    src = tmp_path / "damaged.age"
    src.write_bytes(sealed)
    done = run_agefast("-d", "-i", key_path, "-o", refusing_folder / "out", src)
    assert done.returncode == 1 and b"agefast: error:" in done.stderr, done.stderr
    assert (refusing_folder / "out").read_bytes() == plaintext[:3 * 65536]


def test_a_new_output_in_a_folder_that_takes_no_new_file_is_refused(refusing_folder, key, run_agefast):
    _, _, recipient = key
    done = run_agefast("-r", recipient, "-o", refusing_folder / "new", input=b"plaintext")
    assert done.returncode == 1, done.stderr
    assert b'failed to open output file' in done.stderr and b"new" in done.stderr, done.stderr
    assert sorted(p.name for p in refusing_folder.iterdir()) == ["out"]


def test_a_wrong_key_leaves_an_output_in_place_as_it_was(refusing_folder, key, run_agefast, tmp_path):
    # age opens its output at the first write, once the header opened: nothing written, nothing emptied.
    key_path, _, _ = key
    src = tmp_path / "other.age"
    src.write_bytes(agefast.encrypt(b"secret", [agefast.x25519.Identity.generate().to_public()]))
    out = refusing_folder / "out"
    before = out.read_bytes()
    done = run_agefast("-d", "-i", key_path, "-o", out, src)
    assert done.returncode == 1 and b"no identity matched any of the recipients" in done.stderr, done.stderr
    assert out.read_bytes() == before


def test_an_empty_plaintext_in_place_empties_the_output(refusing_folder, key, run_agefast, tmp_path):
    key_path, _, recipient = key
    src = tmp_path / "empty.age"
    src.write_bytes(agefast.encrypt(b"", [agefast.x25519.Recipient.from_str(recipient)]))
    done = run_agefast("-d", "-i", key_path, "-o", refusing_folder / "out", src)
    assert done.returncode == 0, done.stderr
    assert (refusing_folder / "out").read_bytes() == b""


@pytest.mark.parametrize("command", [
    [*AGEFAST, "-d"],
    [sys.executable, "-m", "agefast.cli.rekey", "-r", "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"],
], ids=["agefast", "agefast-rekey"])
def test_output_onto_the_batchpass_passphrase_file(tmp_path, command):
    """-o onto the file -j batchpass reads from $AGE_PASSPHRASE_FD: the passphrase's only copy."""
    passphrase = tmp_path / "pass.txt"
    passphrase.write_bytes(b"correct horse\n")
    src = tmp_path / "in.age"
    src.write_bytes(agefast.passphrase.encrypt(b"secret", "correct horse"))
    with open(passphrase, "rb") as f:
        done = subprocess.run([*command, "-j", "batchpass", "-o", passphrase, src], capture_output=True,
                              env={**os.environ, "AGE_PASSPHRASE_FD": str(f.fileno())}, pass_fds=(f.fileno(),),
                              stdin=subprocess.DEVNULL, timeout=60)
    _refused(done, (passphrase, b"correct horse\n"))


def _mount(*args):
    done = subprocess.run(["mount", *map(str, args)], capture_output=True)
    if done.returncode:
        pytest.skip(f"mount {' '.join(map(str, args))} failed here: {done.stderr.decode().strip()}")


def test_output_onto_a_bind_mounted_file_in_a_read_only_folder_is_written_into_it(tmp_path, key, run_agefast):
    # docker run --read-only -v host.age:/out.age: age writes into it. No rename replaces a mount point (EBUSY),
    # and its folder takes no file to rename from (EROFS).
    if os.geteuid() != 0:
        pytest.skip("mounts need root")
    key_path, _, recipient = key
    source, folder = tmp_path / "host.age", tmp_path / "root"
    source.write_bytes(b"old contents")
    folder.mkdir()
    (folder / "out.age").write_bytes(b"")
    with contextlib.ExitStack() as mounts:
        _mount("--bind", folder, folder)
        mounts.callback(subprocess.run, ["umount", str(folder)], check=True)
        _mount("-o", "remount,ro,bind", folder)
        _mount("--bind", source, folder / "out.age")
        mounts.callback(subprocess.run, ["umount", str(folder / "out.age")], check=True)
        done = run_agefast("-r", recipient, "-o", folder / "out.age", input=b"plaintext")
    assert done.returncode == 0, done.stderr
    identity = agefast.x25519.Identity.from_str(key_path.read_text().strip())
    assert agefast.decrypt(source.read_bytes(), [identity]) == b"plaintext"
