"""The agefast and agefast-keygen commands: flags, failures, terminals, key files.

Every failure must be one `agefast: error: ...` line on stderr (then perhaps
`agefast: hint: ...` lines) with exit status 1, no traceback, and no file
left at -o; flags that don't parse exit with status 2, as with age.
"""

import base64
import os
import platform
import re
import signal
import subprocess
import sys
import time

import pytest

import agefast
from agefast.cli import wordlist

CHUNK = 64 * 1024
AGEFAST = [sys.executable, "-m", "agefast"]
VERSION_LINE = b"age-encryption.org/v1\n"


def _b64(data: bytes) -> bytes:
    return base64.b64encode(data).rstrip(b"=")


def _stanza(*args: bytes, body: bytes) -> bytes:
    return b"-> " + b" ".join(args) + b"\n" + _b64(body) + b"\n"


def _header(*stanzas: bytes) -> bytes:
    return VERSION_LINE + b"".join(stanzas) + b"--- " + _b64(bytes(32)) + b"\n"


def _assert_one_error_line(stderr: bytes, fragment: str, prog: str = "agefast") -> None:
    """One error line holding `fragment`, then only hints."""
    text = stderr.decode()
    assert "Traceback" not in text
    lines = text.splitlines()
    assert lines and lines[0].startswith(f"{prog}: error: "), text
    assert all(line.startswith(f"{prog}: hint: ") for line in lines[1:]), text
    assert fragment.lower() in lines[0].lower(), text


def _last_line(transcript: bytes) -> str:
    """The last line on the terminal, without the escapes that erase a prompt."""
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", transcript.decode()).splitlines()[-1]


@pytest.fixture
def other_key(tmp_path):
    """An identity file no test file is encrypted to."""
    path = tmp_path / "other.txt"
    path.write_text(f"{agefast.x25519.Identity.generate()}\n")
    return path


@pytest.fixture
def encrypt_to_age_key(age_key):
    _, recipient = age_key

    def encrypt(plaintext: bytes, armored: bool = False) -> bytes:
        return agefast.encrypt(plaintext, [agefast.x25519.Recipient.from_str(recipient)], armored=armored)

    return encrypt


# --- flags -------------------------------------------------------------------

FLAG_ERRORS = [
    (["-e", "-d"], "-e/--encrypt can't be used with -d/--decrypt"),
    (["-p", "-r", "{recipient}"], "can't be combined"),
    (["-a"], "missing recipients"),
    (["-d", "-r", "{recipient}"], "-r/--recipient"),
    (["-d", "-a"], "-a/--armor"),
    (["-d", "-p"], "-p/--passphrase"),
    (["-i", "{key}"], "can't be used in encryption mode unless"),
    (["-r", "age1notakey"], "recipient 'age1notakey': malformed"),
    (["-r", "{recipient}", "a", "b"], 'too many INPUT arguments: "a" "b"'),
    (["-r", "{recipient}", "/nonexistent/input"], 'failed to open input file "/nonexistent/input": No such file'),
    (["-d", "-i", "/nonexistent/key.txt"], 'failed to open identity file "/nonexistent/key.txt": No such file'),
    (["-e", "-i", "/"], 'failed to open identity file "/": Is a directory'),
    (["-R", "/nonexistent/keys.txt"], 'failed to open recipients file "/nonexistent/keys.txt": No such file'),
    (["-e", "-i", "-"], "standard input is used for multiple purposes"),
    (["-r", "{recipient}", "-R", "-", "-"], "standard input is used for multiple purposes"),
]


@pytest.mark.parametrize(("args", "fragment"), FLAG_ERRORS, ids=[" ".join(a) or "none" for a, _ in FLAG_ERRORS])
def test_flag_errors(args, fragment, age_key, run_agefast):
    key_path, recipient = age_key
    done = run_agefast(*(a.format(recipient=recipient, key=key_path) for a in args), input=b"")
    assert done.returncode == 1
    _assert_one_error_line(done.stderr, fragment)


@pytest.mark.parametrize(("output", "fragment"), [
    ("/nonexistent/dir/out", 'failed to open output file "/nonexistent/dir/out": No such file'),
    ("/", 'failed to open output file "/": Is a directory'),
])
def test_output_errors(output, fragment, age_key, encrypt_to_age_key, run_agefast):
    key_path, _ = age_key
    done = run_agefast("-d", "-o", output, "-i", key_path, input=encrypt_to_age_key(b"x"))
    assert done.returncode == 1
    _assert_one_error_line(done.stderr, fragment)


# A file that can't be used, named with its role as Go age names it: the
# command, with {missing} a path that does not exist and {file} one that
# does, and the message both agree on before the system's reason.
ROLES_AS_GO_AGE = [
    (["age", "-r", "{recipient}", "{missing}"], 'failed to open input file "{missing}": '),
    (["age-keygen", "-y", "{missing}"], 'failed to open input file "{missing}": '),
    (["age-keygen", "-o", "{file}"], 'failed to open output file "{file}": '),
]


@pytest.mark.requires_tool("age", "age-keygen")
@pytest.mark.parametrize(("args", "message"), ROLES_AS_GO_AGE, ids=[" ".join(a[:2]) for a, _ in ROLES_AS_GO_AGE])
def test_a_file_that_cannot_be_used_is_named_as_go_age_names_it(args, message, tmp_path, age_key):
    _, recipient = age_key
    names = {"recipient": recipient, "missing": str(tmp_path / "missing"), "file": str(tmp_path / "file")}
    (tmp_path / "file").write_text("")
    args = [a.format(**names) for a in args]
    ours = {"age": [*AGEFAST], "age-keygen": [sys.executable, "-m", "agefast.cli.keygen"]}[args[0]]
    for program, command in ((args[0], args), ("agefast" if args[0] == "age" else "agefast-keygen",
                                               [*ours, *args[1:]])):
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        assert done.returncode == 1
        assert done.stderr.decode().startswith(f"{program}: error: {message.format(**names)}"), done.stderr


def test_file_failures_are_told_in_one_line():
    from agefast.cli.files import FileFailed, named
    from agefast.cli.outcome import describe

    with pytest.raises(FileFailed) as failed:
        with named("recipients file", 'a "b"\n'):
            open("/nonexistent/a", "rb")
    assert describe(failed.value) == 'failed to open recipients file "a \\"b\\"\\n": No such file or directory'
    error = FileFailed("write", "output file", "out.age", OSError(28, "No space left on device", "out.age"))
    assert describe(error) == 'failed to write output file "out.age": No space left on device'
    # agefast-tree names its files in bytes: shown as the file system decodes them, not as b'...'
    assert describe(OSError(30, "Read-only file system", b"/ro/caf\xe9")) == "/ro/caf\udce9: Read-only file system"


@pytest.mark.parametrize("flag", ["-h", "-help", "--help", "--h"])
def test_help_lists_age_flags(flag, run_agefast):
    """As age: usage on stderr, status 0, whatever else was given."""
    done = run_agefast("-p", flag)
    assert (done.returncode, done.stdout) == (0, b"")
    assert done.stderr.startswith(b"Usage:\n")
    for name in ["--encrypt", "--decrypt", "--recipient", "--recipients-file", "--identity",
                 "--armor", "--output", "--passphrase", "--threads"]:
        assert name in done.stderr.decode()


def test_no_arguments_prints_usage(run_agefast):
    done = run_agefast()
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.startswith(b"Usage:\n")


@pytest.mark.parametrize(("args", "message"), [
    (["-this-flag-does-not-exist"], "flag provided but not defined: -this-flag-does-not-exist"),
    (["-r"], "flag needs an argument: -r"),
    (["-r", "{recipient}", "--threads", "0"], 'invalid value "0" for flag -threads: not a positive integer'),
    (["-r", "{recipient}", "--threads=x"], 'invalid value "x" for flag -threads'),
    # int() takes these; Go's strconv.Atoi, as age's flags, does not.
    (["-r", "{recipient}", "--threads", "\u0663"], 'invalid value "\u0663" for flag -threads'),
    (["-r", "{recipient}", "--threads", "1_0"], 'invalid value "1_0" for flag -threads'),
    (["-r", "{recipient}", "--threads", "9223372036854775808"], 'invalid value "9223372036854775808" for flag'),
    (["-a=maybe", "-r", "{recipient}"], 'invalid boolean value "maybe" for -a'),
    (["---armor"], "bad flag syntax: ---armor"),
])
def test_unparsable_flags_exit_2(args, message, age_key, run_agefast):
    """Go's flag package's message, then the usage, and status 2."""
    _, recipient = age_key
    done = run_agefast(*(a.format(recipient=recipient) for a in args), input=b"")
    assert done.returncode == 2
    first, rest = done.stderr.decode().split("\n", 1)
    assert message in first
    assert rest.startswith("Usage:\n")


@pytest.mark.parametrize("spelling", [
    ["-armor", "-recipient", "{recipient}", "-output", "{out}"],
    ["--armor", "--recipient={recipient}", "--output={out}"],
    ["-a=true", "-r={recipient}", "-o", "{out}"],
    ["-r", "{recipient}", "-output", "{out}", "-armor", "--"],
])
def test_go_style_flags(spelling, tmp_path, age_key, run_agefast):
    """Single and double dashes, "=" or a separate value, as Go's flag package reads them.

    (`-r R -output x` once wrote to a file named "utput".)
    """
    key_path, recipient = age_key
    out = tmp_path / "out.age"
    done = run_agefast(*(a.format(recipient=recipient, out=out) for a in spelling), input=b"flags", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(tmp_path)) == ["out.age"]
    assert out.read_bytes().startswith(b"-----BEGIN AGE ENCRYPTED FILE-----\n")
    decrypted = run_agefast("-decrypt", "-identity", key_path, out)
    assert decrypted.stdout == b"flags"


def test_input_before_flags_hint(age_key, run_agefast, tmp_path):
    """Flags after INPUT are not flags (Go stops at the first argument): age's hint says so."""
    _, recipient = age_key
    done = run_agefast("-r", recipient, "input.txt", "-o", "out.age", cwd=tmp_path)
    assert done.returncode == 1
    _assert_one_error_line(done.stderr, 'too many INPUT arguments: "input.txt" "-o" "out.age"')
    assert b"agefast: hint: the input file must be specified after all flags" in done.stderr
    assert f"agefast -r {recipient} -o out.age input.txt".encode() in done.stderr


@pytest.mark.parametrize(("args", "warning"), [
    (["-r", "{recipient}", "-a", "-r", "{recipient}"], 'duplicate recipient "{recipient}"'),
    (["-R", "{rfile}", "-R", "{rfile}", "-R", "{rfile}"], 'duplicate recipients file "{rfile}"'),
    (["-e", "-i", "{key}", "-i", "{key}"], 'duplicate identity file "{key}"'),
])
def test_duplicates_warn_once(args, warning, tmp_path, age_key, run_agefast):
    key_path, recipient = age_key
    rfile = tmp_path / "recipients.txt"
    rfile.write_text(f"{recipient}\n")
    fill = dict(recipient=recipient, rfile=rfile, key=key_path)
    done = run_agefast(*(a.format(**fill) for a in args), "-a", input=b"x")
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines() == [f"agefast: warning: {warning.format(**fill)}"]


# --- round trips ---------------------------------------------------------------

def test_every_recipient_flag_can_decrypt(tmp_path, age_key, other_key, run_agefast, make_plaintext):
    """-r, -R (with comments) and -e -i each add a recipient that can decrypt."""
    age_key_path, age_recipient = age_key
    third = agefast.x25519.Identity.generate()
    third_path = tmp_path / "third.txt"
    third_path.write_text(f"# a comment\n\n{third}\n")
    recipients_file = tmp_path / "recipients.txt"
    recipients_file.write_text(f"# the Go age-keygen key\n{age_recipient}\n\n")
    other_recipient = str(agefast.parse_identities(other_key.read_text())[0].to_public())
    plaintext = make_plaintext(CHUNK + 1)
    encrypted = run_agefast("-r", other_recipient, "-R", recipients_file, "-e", "-i", third_path, "-a",
                            input=plaintext)
    assert encrypted.returncode == 0, encrypted.stderr
    assert encrypted.stdout.startswith(b"-----BEGIN AGE ENCRYPTED FILE-----\n")
    for key in (age_key_path, other_key, third_path):
        decrypted = run_agefast("-d", "-i", key, input=encrypted.stdout)
        assert decrypted.returncode == 0, decrypted.stderr
        assert decrypted.stdout == plaintext


def test_output_file_replaced_only_when_whole(tmp_path, age_key, run_agefast, make_plaintext):
    key_path, recipient = age_key
    src, out = tmp_path / "plain", tmp_path / "out" / "file.age"
    out.parent.mkdir()
    out.write_bytes(b"old contents")
    src.write_bytes(make_plaintext(3 * CHUNK + 100))
    assert run_agefast("-r", recipient, "--threads", "+2", "-o", out, src).returncode == 0     # Go's Atoi takes "+"
    assert os.listdir(out.parent) == ["file.age"]
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask
    decrypted = run_agefast("-d", "--threads", "2", "-i", key_path, out)
    assert decrypted.stdout == src.read_bytes()


def test_an_empty_output_or_input_is_standard_output_or_input(age_key, run_agefast, run_keygen):
    # As in Go age (name != "" && name != "-"); agefast had failed to open output file "".
    key_path, recipient = age_key
    encrypted = run_agefast("-r", recipient, "-o", "", "", input=b"standard streams")
    assert encrypted.returncode == 0, encrypted.stderr
    decrypted = run_agefast("-d", "-i", key_path, "-o", "", "", input=encrypted.stdout)
    assert (decrypted.returncode, decrypted.stdout) == (0, b"standard streams"), decrypted.stderr
    made = run_keygen("-o", "")
    assert made.returncode == 0 and made.stdout.startswith(b"# created: "), made.stderr


@pytest.mark.parametrize("command, closed", [
    (["agefast.cli.keygen"], 1), (["agefast.cli.inspect"], 0), (["agefast", "-d", "-i", "KEY"], 0),
    (["agefast", "-d", "-i", "KEY", "SEALED"], 1), (["agefast.cli.rekey", "-i", "KEY", "-r", "R", "-o", "/dev/null"], 0),
])
def test_a_closed_standard_stream_is_one_error_line(command, closed, age_key, encrypt_to_age_key, tmp_path):
    # `cmd >&-` or `cmd <&-`: Python leaves sys.stdout None, and each command's use of it was a traceback.
    key_path, recipient = age_key
    sealed = tmp_path / "sealed.age"
    sealed.write_bytes(encrypt_to_age_key(b"x"))
    args = [{"KEY": str(key_path), "SEALED": str(sealed), "R": recipient}.get(a, a) for a in command]
    done = subprocess.run([sys.executable, "-m", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, preexec_fn=lambda: os.close(closed), timeout=60)
    name = args[0].rsplit(".", 1)[-1]
    name = "agefast" if name == "agefast" else f"agefast-{name}"
    assert done.returncode == 1
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{name}: error: ") and "Bad file descriptor" in lines[0], lines


def test_a_closed_stderr_takes_nothing_from_stdout_nor_the_exit_status(age_key, encrypt_to_age_key, tmp_path):
    # print() falls back to stdout without a stderr: the error followed the verified plaintext into the
    # output, and the flush at exit of a stderr that was None made a success exit 1.
    key_path, _ = age_key
    sealed = encrypt_to_age_key(bytes(3 * 65536))
    for data, code, out in ((sealed[:-100], 1, bytes(2 * 65536)), (sealed, 0, bytes(3 * 65536))):
        done = subprocess.run([*AGEFAST, "-d", "-i", key_path], input=data, capture_output=True,
                              preexec_fn=lambda: os.close(2), timeout=60)
        assert (done.returncode, done.stdout) == (code, out)


def test_with_stdout_closed_no_file_is_opened_as_stdout(age_key, tmp_path):
    # The input was opened as descriptor 1, which -o /dev/stdout then named: the only copy was overwritten.
    _, recipient = age_key
    doc = tmp_path / "doc.txt"
    doc.write_bytes(b"the only copy")
    done = subprocess.run([*AGEFAST, "-r", recipient, "-o", "/dev/stdout", doc], stdin=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1), timeout=60)
    assert doc.read_bytes() == b"the only copy", done.stderr


def test_closed_stdout_is_one_error_line(age_key, encrypt_to_age_key):
    key_path, _ = age_key
    proc = subprocess.Popen([*AGEFAST, "-d", "-i", key_path], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader goes away before any output
    _, stderr = proc.communicate(encrypt_to_age_key(b"small"), timeout=60)
    assert proc.returncode == 1
    _assert_one_error_line(stderr, "Broken pipe")


def test_missing_identity_hint(encrypt_to_age_key, run_agefast):
    done = run_agefast("-d", input=encrypt_to_age_key(b"x"))
    assert done.returncode == 1
    _assert_one_error_line(done.stderr, "the file is not passphrase-encrypted, identities are required")
    assert b"agefast: hint: specify identities with -i/--identity or -j" in done.stderr


# --- bad input -------------------------------------------------------------------

def _payload_start(ciphertext: bytes) -> int:
    return ciphertext.index(b"\n", ciphertext.index(b"\n---")) + 1


def _flip(data: bytes, i: int) -> bytes:
    return data[:i] + bytes([data[i] ^ 1]) + data[i + 1:]


def _bad_armor(armored: bytes) -> bytes:
    # A character outside the base64 alphabet in the middle of the body.
    return armored.replace(b"\n", b"\n!", 2)


# name -> (ciphertext from (binary 3-chunk file, armored file, 2-chunk file), expected fragment)
BAD_INPUTS = {
    "corrupted chunk": (lambda b, a, two: _flip(b, _payload_start(b) + 16 + 100), "payload"),
    "corrupted last chunk": (lambda b, a, two: _flip(b, len(b) - 1), "payload"),
    "truncated in a chunk": (lambda b, a, two: b[:-1], "payload"),
    "truncated at a chunk boundary": (lambda b, a, two: two[:-(CHUNK + 16)], "payload"),
    "truncated header": (lambda b, a, two: b[:40], "header"),
    "trailing data": (lambda b, a, two: b + b"\0", "payload"),
    "empty file": (lambda b, a, two: b"", "header"),
    "bad armor": (lambda b, a, two: _bad_armor(a), "armor"),
    "armor without end line": (lambda b, a, two: a[:a.index(b"-----END")], "armor"),
    # An extra stanza is ignored when unwrapping, but the header MAC covers it.
    "altered header": (lambda b, a, two: VERSION_LINE + _stanza(b"extra", body=b"") + b[len(VERSION_LINE):],
                       "header MAC"),
    "unknown stanza only": (lambda b, a, two: _header(_stanza(b"unknown-type", b"arg", body=b"x" * 10)) + bytes(40),
                            "no identity matched"),
    "oversized header line": (lambda b, a, two: VERSION_LINE + b"-> X25519 " + b"A" * (1 << 20) + b"\n", "header"),
}


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_input(name, tmp_path, age_key, encrypt_to_age_key, run_agefast, make_plaintext):
    key_path, _ = age_key
    make, fragment = BAD_INPUTS[name]
    plaintext = make_plaintext(3 * CHUNK + 100)
    data = make(encrypt_to_age_key(plaintext), encrypt_to_age_key(plaintext, armored=True),
                encrypt_to_age_key(make_plaintext(2 * CHUNK)))
    src = tmp_path / "bad.age"
    src.write_bytes(data)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    done = run_agefast("-d", "-i", key_path, "-o", out_dir / "plain", src)
    assert done.returncode == 1
    _assert_one_error_line(done.stderr, fragment)
    assert os.listdir(out_dir) == []


@pytest.mark.parametrize("byte", [b"\n", b" "])
def test_endless_leading_whitespace(byte, tmp_path, age_key):
    """A pipe of whitespace fails at once, having read a few kilobytes of it:
    only armor may start with whitespace, and at most 1024 bytes of it."""
    key_path, _ = age_key
    proc = subprocess.Popen([*AGEFAST, "-d", "-i", key_path, "-o", tmp_path / "out"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    block = byte * (1 << 20)
    written = 0
    try:
        while written < 256 << 20:
            proc.stdin.write(block)
            written += len(block)
    except BrokenPipeError:
        pass
    stderr = proc.communicate(timeout=60)[1]
    assert proc.returncode == 1
    _assert_one_error_line(stderr, "starts with whitespace")
    # What the pipe held when the command had given up, not the 256 MiB.
    assert written < 64 << 20
    assert not (tmp_path / "out").exists()


def test_wrong_key(tmp_path, other_key, encrypt_to_age_key, run_agefast):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    done = run_agefast("-d", "-i", other_key, "-o", out_dir / "plain", input=encrypt_to_age_key(b"secret"))
    assert done.returncode == 1
    _assert_one_error_line(done.stderr, "no identity matched")
    assert os.listdir(out_dir) == []


def test_failure_keeps_existing_output(tmp_path, other_key, encrypt_to_age_key, run_agefast):
    out = tmp_path / "plain"
    out.write_bytes(b"precious")
    done = run_agefast("-d", "-i", other_key, "-o", out, input=encrypt_to_age_key(b"secret"))
    assert done.returncode == 1
    assert sorted(os.listdir(tmp_path)) == ["other.txt", "plain"]
    assert out.read_bytes() == b"precious"


def _scrypt_stanza(work_factor: bytes) -> bytes:
    return _stanza(b"scrypt", _b64(bytes(range(16))), work_factor, body=bytes(32))


@pytest.mark.parametrize(("name", "fragment"), [
    ("work factor above the cap", "work factor"),
    ("scrypt mixed with X25519", "header"),
])
def test_bad_passphrase_file(name, fragment, tmp_path, age_key, encrypt_to_age_key, tty_run):
    """scrypt headers that must be refused; the prompt (if any) is answered."""
    key_path, _ = age_key
    if name == "work factor above the cap":
        # Without -i: a passphrase is asked for, then the work factor refused.
        data, identity_flags = _header(_scrypt_stanza(b"23")) + bytes(40), []
    else:
        real = encrypt_to_age_key(b"x")
        data, identity_flags = VERSION_LINE + _scrypt_stanza(b"18") + real[len(VERSION_LINE):], ["-i", key_path]
    src = tmp_path / "bad.age"
    src.write_bytes(data)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    done = tty_run([*AGEFAST, "-d", *identity_flags, "-o", out_dir / "plain", src],
                   [(b"Enter passphrase", "anything")])
    assert done.returncode == 1
    last = _last_line(done.transcript)
    assert last.startswith("agefast: error: ") and fragment in last, done.transcript
    assert b"Traceback" not in done.transcript
    assert os.listdir(out_dir) == []


# --- terminals and passphrases ------------------------------------------------------

def test_refuses_binary_to_terminal(tmp_path, age_key, tty_run):
    _, recipient = age_key
    src = tmp_path / "plain"
    src.write_bytes(b"hello")
    done = tty_run([*AGEFAST, "-r", recipient, src])
    assert done.returncode == 1
    assert b"agefast: error: refusing to output binary to the terminal" in done.transcript
    assert b"agefast: hint: did you mean to use -a/--armor?" in done.transcript


def test_refuses_decrypted_binary_to_terminal(tmp_path, age_key, encrypt_to_age_key, tty_run):
    """Decrypted output for a terminal is held back and shown only if it is text."""
    key_path, _ = age_key
    for plaintext, shown in [(b"text\tand lines\n", True), (b"bin\x00ary", False)]:
        src = tmp_path / "in.age"
        src.write_bytes(encrypt_to_age_key(plaintext))
        done = tty_run([*AGEFAST, "-d", "-i", key_path, src])
        assert done.returncode == (0 if shown else 1), done.transcript
        assert (b"text\tand lines" in done.transcript) == shown
        assert (b'hint: force anyway with "-o -"' in done.transcript) != shown


@pytest.mark.parametrize(("flags", "expected"), [
    (["-a"], b"-----BEGIN AGE ENCRYPTED FILE-----"),
    (["-o", "-"], b"age-encryption.org/v1"),
])
def test_terminal_output_allowed(flags, expected, tmp_path, age_key, tty_run):
    """Armor may go to a terminal; "-o -" forces binary there, as with age."""
    _, recipient = age_key
    src = tmp_path / "plain"
    src.write_bytes(b"hello")
    done = tty_run([*AGEFAST, "-r", recipient, *flags, src])
    assert done.returncode == 0, done.transcript
    assert expected in done.transcript


def test_passphrase_round_trip_without_echo(tmp_path, tty_run):
    src, encrypted, decrypted = tmp_path / "plain", tmp_path / "file.age", tmp_path / "again"
    src.write_bytes(b"hello")
    answers = [(b"Enter passphrase", "not on screen"), (b"Confirm passphrase", "not on screen")]
    for args, prompts in ([["-p", "-o", encrypted, src], answers], [["-d", "-o", decrypted, encrypted], answers[:1]]):
        done = tty_run([*AGEFAST, *args], prompts)
        assert done.returncode == 0, done.transcript
        assert b"not on screen" not in done.transcript
    assert decrypted.read_bytes() == b"hello"


def test_interrupted_prompt(tmp_path, tty_run):
    src = tmp_path / "plain"
    src.write_bytes(b"hello")
    done = tty_run([*AGEFAST, "-p", "-o", tmp_path / "out.age", src], [(b"Enter passphrase", "\x03")])
    assert done.returncode == -signal.SIGINT      # as age dies of it, once the output is removed
    assert b"error" not in done.transcript and b"Traceback" not in done.transcript
    assert os.listdir(tmp_path) == ["plain"]


def test_an_scrypt_stanza_with_company_is_refused_before_the_passphrase_is_asked_for(tmp_path, run_agefast):
    # As age: the header is refused first. agefast had asked for a passphrase (here, with no terminal to ask
    # on, failed on that) and run scrypt on it, for a file it then refused.
    def b64(data):
        return base64.b64encode(data).decode().rstrip("=")
    header = (f"age-encryption.org/v1\n-> X25519 {b64(bytes(range(32)))}\n{b64(bytes(32))}\n"
              f"-> scrypt {b64(bytes(16))} 10\n{b64(bytes(32))}\n--- {b64(bytes(32))}\n")
    sealed = tmp_path / "mixed.age"
    sealed.write_bytes(header.encode() + bytes(16 + 17))
    done = run_agefast("-d", sealed, start_new_session=True)
    assert done.returncode == 1
    assert done.stderr == b"agefast: error: invalid header: an scrypt recipient must be the only one\n"


def _wait_for_a_read_of_stdin(pid: int) -> None:
    """Until the process `pid` waits in read(0, ...), as /proc/PID/syscall tells (x86-64 and arm64 numbers);
    where it cannot tell, a second (which a loaded machine may not give the imports)."""
    read = {"x86_64": "0", "aarch64": "63"}.get(platform.machine())
    deadline = time.monotonic() + 60
    while read is not None and time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/syscall") as f:
                if f.read().split()[:2] == [read, "0x0"]:
                    return
        except OSError:
            break
        time.sleep(0.01)
    time.sleep(1.0)


@pytest.mark.parametrize("command", [["agefast.cli.keygen", "-y"], ["agefast.cli.inspect"]])
def test_ctrl_c_ends_every_command_as_it_ends_age(command):
    # agefast-keygen and agefast-inspect, waiting on standard input, printed KeyboardInterrupt's traceback.
    # SIGINT at its default, as in a shell's foreground, not as the tests may have inherited it (ignored in a
    # shell's background job).
    proc = subprocess.Popen([sys.executable, "-m", *command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        _wait_for_a_read_of_stdin(proc.pid)     # past the imports: a signal there is Python's start-up's
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert (proc.returncode, stderr) == (-signal.SIGINT, b"")


@pytest.mark.parametrize("typed, message", [("wrong", "incorrect passphrase"),
                                            ("", "passphrase can't be empty")])    # as age: not tried
def test_wrong_passphrase(typed, message, tmp_path, tty_run):
    src = tmp_path / "in.age"
    src.write_bytes(agefast.encrypt(b"x", [agefast.passphrase.Recipient("pw", work_factor=10)]))
    done = tty_run([*AGEFAST, "-d", src], [(b"Enter passphrase", typed)])
    assert done.returncode == 1
    assert _last_line(done.transcript) == f"agefast: error: {message}"


def test_mismatched_passphrases(tmp_path, tty_run):
    src, out = tmp_path / "plain", tmp_path / "out.age"
    src.write_bytes(b"hello")
    prompts = [b"Enter passphrase", b"Confirm passphrase"]
    done = tty_run([*AGEFAST, "-p", "-o", out, src], list(zip(prompts, ["one", "two"])))
    assert done.returncode == 1
    assert "passphrases didn't match" in _last_line(done.transcript)
    assert not out.exists()


def test_empty_passphrase_generates_one(tmp_path, tty_run):
    """As age: ten words of the BIP-39 list, shown on the terminal only, never on stderr."""
    src, out = tmp_path / "plain", tmp_path / "out.age"
    src.write_bytes(b"hello")
    done = tty_run([*AGEFAST, "-p", "-o", out, src], [(b"Enter passphrase (leave empty to autogenerate", "")])
    assert done.returncode == 0, done.transcript
    generated = re.search(rb'agefast: using autogenerated passphrase "([a-z]+(?:-[a-z]+){9})"', done.transcript)
    assert generated is not None, done.transcript
    assert b"Confirm passphrase" not in done.transcript
    passphrase = generated.group(1).decode()
    assert all(word in wordlist.words() for word in passphrase.split("-"))
    assert agefast.decrypt(out.read_bytes(), [agefast.passphrase.Identity(passphrase)]) == b"hello"


def test_passphrase_needs_a_terminal(run_agefast, tmp_path):
    # A new session has no controlling terminal, so /dev/tty cannot be opened. As age, the error says what was
    # being read (it had not), for a passphrase to encrypt with or an identity file's.
    done = run_agefast("-p", "-a", input=b"data", start_new_session=True)
    assert done.returncode == 1
    _assert_one_error_line(done.stderr, "could not read passphrase: standard input is not a terminal, and "
                                        "/dev/tty is not available")
    inner = agefast.x25519.Identity.generate()
    keys = tmp_path / "keys.age"
    keys.write_bytes(agefast.passphrase.encrypt(f"{inner}\n".encode(), "a passphrase"))
    sealed = tmp_path / "sealed.age"
    sealed.write_bytes(agefast.encrypt(b"data", [inner.to_public()]))
    done = run_agefast("-d", "-i", keys, sealed, stdin=subprocess.DEVNULL, start_new_session=True)
    assert done.returncode == 1
    _assert_one_error_line(done.stderr, "could not read passphrase: standard input is not a terminal")


# --- agefast-keygen -------------------------------------------------------------------

KEY_FILE = re.compile(
    r"# created: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)\n"
    r"# public key: (age1[02-9ac-hj-np-z]+)\n"
    r"(AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]+)\n")


def _age_keygen_y(path) -> str:
    return subprocess.run(["age-keygen", "-y", path], check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("mangle", [lambda d: d.replace(b"\n", b"\r\n"),
                                    lambda d: b"\xff\xfe" + d.decode("latin-1").encode("utf-16-le")],
                         ids=["crlf", "utf-16"])
@pytest.mark.parametrize("through", ["file", "pipe"])
def test_a_file_powershell_redirected_is_told_as_age_tells_it(tmp_path, mangle, through, run_agefast):
    identity = agefast.x25519.Identity.generate()
    (tmp_path / "key").write_text(f"{identity}\n")
    (tmp_path / "mangled.age").write_bytes(mangle(agefast.encrypt(b"x", [identity.to_public()])))
    if through == "file":
        done = run_agefast("-d", "-i", tmp_path / "key", tmp_path / "mangled.age")
    else:
        # Ten bytes first, then the rest: it had been told only where the first read held the intro's 22.
        feed = f"head -c 10 {tmp_path / 'mangled.age'}; sleep 0.2; tail -c +11 {tmp_path / 'mangled.age'}"
        with subprocess.Popen(["sh", "-c", feed], stdout=subprocess.PIPE) as writer:
            done = run_agefast("-d", "-i", tmp_path / "key", stdin=writer.stdout)
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode().splitlines() == [
        "agefast: error: invalid header intro",
        "agefast: hint: it looks like this file was corrupted by PowerShell redirection",
        "agefast: hint: consider using -o or -a to encrypt files in PowerShell"]


@pytest.mark.parametrize("version, quoted", [(b"v2\x01", r'"age-encryption.org/v2\x01"'),
                                              (b"v\xff", r'"age-encryption.org/v\xff\n"')])
def test_another_version_is_named_in_go_s_quotes(tmp_path, run_agefast, version, quoted):
    identity = agefast.x25519.Identity.generate()
    (tmp_path / "key").write_text(f"{identity}\n")
    (tmp_path / "v2.age").write_bytes(agefast.encrypt(b"x", [identity.to_public()]).replace(b"v1", version, 1))
    done = run_agefast("-d", "-i", tmp_path / "key", tmp_path / "v2.age")
    _assert_one_error_line(done.stderr, f"unsupported age format version: {quoted}")


@pytest.mark.requires_tool("age-keygen")
def test_keygen_output_matches_age_keygen(tmp_path, run_keygen):
    done = run_keygen()
    assert done.returncode == 0
    match = KEY_FILE.fullmatch(done.stdout.decode())
    assert match, done.stdout
    public = match.group(2)
    assert done.stderr.decode() == f"Public key: {public}\n"
    path = tmp_path / "key.txt"
    path.write_bytes(done.stdout)
    assert _age_keygen_y(path) == f"{public}\n"


def test_keygen_file_mode_and_no_overwrite(tmp_path, run_keygen):
    path = tmp_path / "key.txt"
    done = run_keygen("-o", path)
    assert done.returncode == 0
    assert path.stat().st_mode & 0o777 == 0o600
    public = KEY_FILE.fullmatch(path.read_text()).group(2)
    assert done.stderr.decode() == f"Public key: {public}\n"
    before = path.read_bytes()
    again = run_keygen("-o", path)
    assert again.returncode == 1
    _assert_one_error_line(again.stderr, "File exists", prog="agefast-keygen")
    assert path.read_bytes() == before


def test_keygen_warns_about_world_readable_output(tmp_path, run_keygen):
    path = tmp_path / "key.txt"
    path.touch(mode=0o644)
    path.chmod(0o644)
    with open(path, "w") as out:
        done = run_keygen(capture_output=False, stdout=out, stderr=subprocess.PIPE)
    assert done.returncode == 0
    assert "warning: writing secret key to a world-readable file" in done.stderr.decode()
    assert KEY_FILE.fullmatch(path.read_text())


def test_keygen_y_agrees_with_age_keygen(age_key, run_keygen):
    path, recipient = age_key
    assert run_keygen("-y", path).stdout.decode() == f"{recipient}\n"
    assert run_keygen("-y", input=path.read_bytes()).stdout.decode() == f"{recipient}\n"


def test_keygen_y_bad_input(run_keygen):
    done = run_keygen("-y", input=b"AGE-SECRET-KEY-1NOTAKEY\n")
    assert done.returncode == 1
    _assert_one_error_line(done.stderr, "malformed identity on line 1", prog="agefast-keygen")


def test_keygen_y_runs_no_plugin_and_refuses_its_identity(tmp_path, run_keygen):
    # As age-keygen -y (age.ParseIdentities): a plugin identity is of an unknown type. The plugin had been run,
    # and the recipient printed was a Python repr, exit 0.
    plugin = tmp_path / "age-plugin-foo"
    plugin.write_text(f"#!/bin/sh\ntouch {tmp_path / 'ran'}\n")
    plugin.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    done = run_keygen("-y", input=b"AGE-PLUGIN-FOO-1QYQSZQGPQYQSZQGPLXQZEG\n", env=env)
    assert done.returncode == 1 and done.stdout == b""
    _assert_one_error_line(done.stderr, "malformed identity on line 1: unknown identity type", prog="agefast-keygen")
    assert not (tmp_path / "ran").exists()


def test_keygen_post_quantum(tmp_path, run_keygen):
    path = tmp_path / "pq.txt"
    assert run_keygen("-pq", "-o", path).returncode == 0
    lines = path.read_text().splitlines()
    assert lines[1].startswith("# public key: age1pq1") and lines[2].startswith("AGE-SECRET-KEY-PQ-1")
    assert run_keygen("-y", path).stdout.decode() == lines[1].removeprefix("# public key: ") + "\n"


@pytest.mark.requires_tool("age", "age-keygen")
def test_keygen_key_works_with_age(tmp_path, run_keygen, run_agefast):
    path = tmp_path / "key.txt"
    assert run_keygen("-o", path).returncode == 0
    public = _age_keygen_y(path).strip()
    by_age = subprocess.run(["age", "-r", public], input=b"to agefast", capture_output=True, check=True).stdout
    assert run_agefast("-d", "-i", path, input=by_age).stdout == b"to agefast"
    by_agefast = run_agefast("-r", public, input=b"to age").stdout
    assert subprocess.run(["age", "-d", "-i", path], input=by_agefast, capture_output=True).stdout == b"to age"


@pytest.mark.parametrize(("args", "status", "fragment"), [
    (["-h"], 0, "Usage:"),
    (["-x"], 2, "flag provided but not defined: -x"),
    (["-y", "-pq"], 1, "agefast-keygen: error: -pq cannot be used with -y"),
    (["extra"], 1, "agefast-keygen: error: too many arguments"),
    (["-y", "a", "b"], 1, "agefast-keygen: error: too many arguments"),
])
def test_keygen_flags_as_age_keygen(args, status, fragment, run_keygen):
    done = run_keygen(*args)
    assert (done.returncode, done.stdout) == (status, b"")
    assert fragment in done.stderr.decode()


def test_keygen_go_style_output_flag(tmp_path, run_keygen):
    out = tmp_path / "key.txt"
    done = run_keygen("-pq", f"--output={out}")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(b"Public key: age1pq1")
    assert "AGE-SECRET-KEY-PQ-1" in out.read_text()
    again = run_keygen("-output", out)
    assert again.returncode == 1
    assert b"failed to open output file" in again.stderr


@pytest.mark.parametrize("flag", ["-version", "--version"])
def test_version(flag, run_agefast, run_keygen):
    for run in (run_agefast, run_keygen):
        done = run(flag)
        assert done.returncode == 0
        assert re.fullmatch(rb"v\d+\.\d+\.\d+\S*\n", done.stdout), done.stdout


def test_a_thread_the_system_refuses_is_one_error_line(capsys):
    # Under ulimit -d, a large job's thread start had been a RuntimeError's traceback.
    from agefast.cli import outcome

    def refused():
        raise RuntimeError("can't start new thread")
    assert outcome.report_failure("agefast", refused) == 1
    assert capsys.readouterr().err == ("agefast: error: the system refused a thread (its process limits: ulimit -u, "
                                       "-v, -d)\n")
    with pytest.raises(RuntimeError, match="a bug"):     # any other RuntimeError keeps its traceback
        outcome.report_failure("agefast", lambda: (_ for _ in ()).throw(RuntimeError("a bug")))


def test_what_others_wrote_in_an_error_stays_one_line_of_text(capsys):
    # A plugin's error (its own text) had been printed as it came: a newline in it forged a line of agefast's
    # own, and escape sequences reached the terminal. Control characters are shown as escapes.
    from agefast.cli import outcome

    def failed():
        raise agefast.DecryptError("probe plugin: first line\nagefast: note: decryption succeeded\r\x1b[31m\tred")
    assert outcome.report_failure("agefast", failed) == 1
    assert capsys.readouterr().err == ("agefast: error: decryption failed: probe plugin: first line\\nagefast: note: "
                                       "decryption succeeded\\r\\x1b[31m\tred\n")
    outcome.print_warning("a\nb")
    assert capsys.readouterr().err == "agefast: warning: a\\nb\n"
