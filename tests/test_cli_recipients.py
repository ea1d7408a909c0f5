"""The agefast command with SSH keys, encrypted identity files and plugins,
against the Go age command where it has the feature (age 1.1.1: SSH keys and
passphrase-encrypted identity files; its passphrase prompts go to /dev/tty).
"""

import os
import subprocess
import sys

import pytest
from ssh_keys import PASSPHRASE, public_line, ssh_keys  # noqa: F401 (a fixture)
from test_plugin import on_path  # noqa: F401 (a fixture)

import agefast
from agefast.format import bech32

AGEFAST = [sys.executable, "-m", "agefast"]


@pytest.mark.requires_tool("age")
def test_recipients_file_of_authorized_keys(ssh_keys, tmp_path, run_agefast):
    authorized = tmp_path / "authorized_keys"
    # As age 1.3 skips any well-formed SSH key line it cannot parse: an ssh-rsa key of 1024 bits had failed it.
    authorized.write_text("".join(public_line(ssh_keys[k]) for k in ("ed25519", "ecdsa", "rsa3072", "rsa1024")))
    result = run_agefast("-R", authorized, "-o", tmp_path / "f.age", input=b"to both keys")
    assert result.returncode == 0, result.stderr
    assert b"warning: recipients file" in result.stderr and b"line 2: unsupported SSH key type" in result.stderr
    assert b"line 4: ssh-rsa key is 1024 bits; age requires a modulus of at least 256 bytes (2048 bits)" in result.stderr
    for key in ("ed25519", "rsa3072"):
        out = subprocess.run(["age", "-d", "-i", ssh_keys[key], tmp_path / "f.age"], capture_output=True, check=True)
        assert out.stdout == b"to both keys"


@pytest.mark.requires_tool("age")
@pytest.mark.parametrize("key", ["ed25519", "rsa2048-pem"])
def test_ssh_recipient_flag_and_identity_file(key, ssh_keys, tmp_path, run_agefast):
    ours = run_agefast("-r", public_line(ssh_keys[key]).strip(), input=b"ssh -r")
    assert ours.returncode == 0, ours.stderr
    out = subprocess.run(["age", "-d", "-i", ssh_keys[key]], input=ours.stdout, capture_output=True, check=True)
    assert out.stdout == b"ssh -r"
    theirs = subprocess.run(["age", "-R", f"{ssh_keys[key]}.pub"], input=b"from go", capture_output=True, check=True)
    result = run_agefast("-d", "-i", ssh_keys[key], input=theirs.stdout)
    assert (result.returncode, result.stdout) == (0, b"from go"), result.stderr
    # -e -i: encrypt to the private key's own public key.
    result = run_agefast("-e", "-i", ssh_keys[key], input=b"to myself")
    out = subprocess.run(["age", "-d", "-i", ssh_keys[key]], input=result.stdout, capture_output=True, check=True)
    assert out.stdout == b"to myself"


@pytest.mark.requires_tool("age")
@pytest.mark.parametrize("key", ["ed25519-protected", "rsa-protected"])
def test_protected_ssh_key_prompts_on_the_terminal(key, ssh_keys, tmp_path, tty_run):
    encrypted = tmp_path / "f.age"
    encrypted.write_bytes(subprocess.run(["age", "-R", f"{ssh_keys[key]}.pub"], input=b"protected",
                                         capture_output=True, check=True).stdout)
    result = tty_run([*AGEFAST, "-d", "-i", ssh_keys[key], "-o", tmp_path / "out", encrypted],
                     [(b"Enter passphrase for", PASSPHRASE)])
    assert result.returncode == 0, result.transcript
    assert PASSPHRASE.encode() not in result.transcript
    assert (tmp_path / "out").read_bytes() == b"protected"


@pytest.mark.requires_tool("age")
def test_protected_ssh_key_not_asked_for_other_files(ssh_keys, age_key, tmp_path, tty_run):
    key_path, recipient = age_key
    encrypted = tmp_path / "f.age"
    encrypted.write_bytes(subprocess.run(["age", "-r", recipient], input=b"x", capture_output=True, check=True).stdout)
    result = tty_run([*AGEFAST, "-d", "-i", ssh_keys["ed25519-protected"], "-i", key_path, "-o", tmp_path / "out",
                      encrypted])
    assert result.returncode == 0, result.transcript
    assert b"passphrase" not in result.transcript


def _encrypt_identity_file(tool, key_path, out, tty_run):
    answers = [(b"Enter passphrase", "identity file pass"), (b"Confirm passphrase", "identity file pass")]
    result = tty_run([*tool, "-p", "-o", out, key_path], answers)
    assert result.returncode == 0, result.transcript


@pytest.mark.requires_tool("age")
@pytest.mark.parametrize("writer, reader", [("age", "agefast"), ("agefast", "age")])
def test_passphrase_encrypted_identity_file(writer, reader, age_key, tmp_path, tty_run):
    tools = {"age": ["age"], "agefast": AGEFAST}
    key_path, recipient = age_key
    _encrypt_identity_file(tools[writer], key_path, tmp_path / "key.age", tty_run)
    encrypted = tmp_path / "f.age"
    encrypted.write_bytes(subprocess.run(["age", "-r", recipient], input=b"secret data", capture_output=True,
                                         check=True).stdout)
    result = tty_run([*tools[reader], "-d", "-i", tmp_path / "key.age", "-o", tmp_path / "out", encrypted],
                     [(b"Enter passphrase for identity file", "identity file pass")])
    assert result.returncode == 0, result.transcript
    assert (tmp_path / "out").read_bytes() == b"secret data"


@pytest.mark.requires_tool("age")
def test_encrypted_identity_file_wrong_passphrase(age_key, tmp_path, tty_run):
    key_path, recipient = age_key
    _encrypt_identity_file(AGEFAST, key_path, tmp_path / "key.age", tty_run)
    encrypted = tmp_path / "f.age"
    encrypted.write_bytes(subprocess.run(["age", "-r", recipient], input=b"x", capture_output=True, check=True).stdout)
    result = tty_run([*AGEFAST, "-d", "-i", tmp_path / "key.age", encrypted],
                     [(b"Enter passphrase for identity file", "not it")])
    assert result.returncode == 1
    assert b"agefast: error: identity file" in result.transcript and b"cannot decrypt it" in result.transcript


def test_native_identities_are_tried_before_an_encrypted_identity_file(tmp_path, run_agefast):
    # As age 1.3: an X25519 key given after an identity file encrypted to a passphrase opens the file without
    # the passphrase being asked for (here there is no terminal to ask on: asking fails the command).
    inner, key = agefast.x25519.Identity.generate(), agefast.x25519.Identity.generate()
    protected = tmp_path / "protected.age"
    protected.write_bytes(agefast.encrypt(f"{inner}\n".encode(), [agefast.passphrase.Recipient("pw", work_factor=10)]))
    plain = tmp_path / "key.txt"
    plain.write_text(f"{key}\n")
    sealed = tmp_path / "sealed.age"
    sealed.write_bytes(agefast.encrypt(b"no prompt", [key.to_public()]))
    done = run_agefast("-d", "-i", protected, "-i", plain, sealed, start_new_session=True)
    assert (done.returncode, done.stdout) == (0, b"no prompt"), done.stderr


def test_an_identity_file_encrypted_to_a_key_asks_for_no_passphrase(tmp_path, run_agefast):
    # As age's LazyScryptIdentity: the passphrase is asked for only where the identity file's one stanza is
    # scrypt's. An identity file encrypted to a key had been met with a prompt (here, with no terminal, an error
    # about the terminal), then "No matching keys found".
    outer, inner = agefast.x25519.Identity.generate(), agefast.x25519.Identity.generate()
    wrapped = tmp_path / "wrapped.age"
    wrapped.write_bytes(agefast.encrypt(f"{inner}\n".encode(), [outer.to_public()]))
    sealed = tmp_path / "sealed.age"
    sealed.write_bytes(agefast.encrypt(b"x", [inner.to_public()]))
    done = run_agefast("-d", "-i", wrapped, sealed, start_new_session=True)
    assert done.returncode == 1
    assert done.stderr.decode().splitlines()[0] == (
        f"agefast: error: identity file {wrapped} is encrypted with age but not with a passphrase")


def test_an_encrypted_identity_file_that_matches_nothing_is_warned_of(tmp_path, tty_run):
    # age's NoMatchWarning, before the no-match error.
    inner = agefast.x25519.Identity.generate()
    protected = tmp_path / "protected.age"
    protected.write_bytes(agefast.encrypt(f"{inner}\n".encode(), [agefast.passphrase.Recipient("pw", 10)]))
    sealed = tmp_path / "sealed.age"
    sealed.write_bytes(agefast.encrypt(b"x", [agefast.x25519.Identity.generate().to_public()]))
    result = tty_run([*AGEFAST, "-d", "-i", protected, sealed], [(b"Enter passphrase for identity file", "pw")])
    assert result.returncode == 1
    assert f'agefast: warning: encrypted identity file "{protected}" didn\'t match file\'s recipients'.encode() \
        in result.transcript


def test_a_plugin_key_in_the_other_kind_of_file_is_named_not_looked_for(tmp_path, run_agefast):
    # As age 1.3: "apparent recipient found in identities file" (and the reverse), not "plugin not found".
    (tmp_path / "foo.pub").write_text("age1foo1qyqszqgpqyqszqgpu2rn00\n")
    (tmp_path / "plugin.key").write_text("AGE-PLUGIN-FOO-1QYQSZQGPQYQSZQGPLXQZEG\n")
    done = run_agefast("-d", "-i", tmp_path / "foo.pub", input=b"")
    assert done.stderr.decode() == (f"agefast: error: identity file {tmp_path / 'foo.pub'}: malformed identity on "
                                    "line 1: apparent recipient found in identities file\n")
    done = run_agefast("-R", tmp_path / "plugin.key", input=b"x")
    assert done.stderr.decode() == (f"agefast: error: recipients file {tmp_path / 'plugin.key'}: malformed "
                                    "recipient on line 1: apparent identity found in recipients file\n")


def test_plugin_recipient_and_j_flag(on_path, run_agefast):
    # The test plugin's data-less identity pairs with the recipient of empty data.
    recipient = bech32.encode("age1agefasttest", b"")
    encrypted = run_agefast("-r", recipient, input=b"plugin via the command", env=os.environ)
    assert encrypted.returncode == 0, encrypted.stderr
    assert b"agefast: plugin: hello from recipient-v1" in encrypted.stderr
    result = run_agefast("-d", "-j", "agefasttest", input=encrypted.stdout, env=os.environ)
    assert (result.returncode, result.stdout) == (0, b"plugin via the command"), result.stderr


def test_e_j_flag(on_path, run_agefast):
    """-e -j NAME encrypts to the plugin's data-less identity, as age 1.3 does."""
    encrypted = run_agefast("-e", "-j", "agefasttest", input=b"to -j", env=os.environ)
    assert encrypted.returncode == 0, encrypted.stderr
    result = run_agefast("-d", "-j", "agefasttest", input=encrypted.stdout, env=os.environ)
    assert (result.returncode, result.stdout) == (0, b"to -j"), result.stderr


def test_j_flag_keeps_the_name_as_written(on_path, tmp_path, run_agefast):
    """age -j NAME runs age-plugin-NAME as NAME is written: with only age-plugin-agefasttest on PATH,
    -j AgefastTest finds no plugin; an age-plugin-AgefastTest is the one run."""
    missing = run_agefast("-e", "-j", "AgefastTest", input=b"x", env=os.environ)
    assert missing.returncode == 1
    assert b'"AgefastTest" plugin not found' in missing.stderr
    (tmp_path / "age-plugin-agefasttest").rename(tmp_path / "age-plugin-AgefastTest")
    encrypted = run_agefast("-e", "-j", "AgefastTest", input=b"to -j", env=os.environ)
    assert encrypted.returncode == 0, encrypted.stderr
    result = run_agefast("-d", "-j", "AgefastTest", input=encrypted.stdout, env=os.environ)
    assert (result.returncode, result.stdout) == (0, b"to -j"), result.stderr


def test_plugin_labels_are_kept_apart(on_path, run_agefast):
    """A plugin recipient asking for "postquantum" mixes with age1pq1, not with X25519 (age 1.3's labels)."""
    labelled = bech32.encode("age1agefasttest", b"labels")
    pq_recipient = str(agefast.pq.Identity.generate().to_public())
    classic = str(agefast.x25519.Identity.generate().to_public())
    mixed = run_agefast("-r", labelled, "-r", pq_recipient, "-a", input=b"x", env=os.environ)
    assert mixed.returncode == 0, mixed.stderr
    refused = run_agefast("-r", labelled, "-r", classic, "-a", input=b"x", env=os.environ)
    assert refused.returncode == 1
    assert b"incompatible recipients" in refused.stderr


@pytest.mark.parametrize("args, fragment", [
    (["-d", "-j", "../evil"], b"-j ../evil: Invalid plugin name"),  # pyrage's words, which its tests match
    (["-r", bech32.encode("age1nosuchplugin", b"")], b'"nosuchplugin" plugin not found'),
    (["-e", "-j", "nosuchplugin"], b'"nosuchplugin" plugin not found'),
    (["-j", "agefasttest"], b"-j can't be used in encryption mode unless"),
])
def test_j_flag_errors(args, fragment, run_agefast):
    result = run_agefast(*args, input=b"")
    assert result.returncode == 1
    assert fragment in result.stderr.splitlines()[0]
    if b"not found" in fragment:
        # The hints name the page age names.
        assert b"agefast: hint: visit https://age-encryption.org/awesome#plugins" in result.stderr


@pytest.mark.parametrize("flags", [["-j", "nosuchplugin"], ["-i", "KEY", "-j", "nosuchplugin"],
                                   ["-j", "nosuchplugin", "-i", "KEY"]], ids=["alone", "after-i", "before-i"])
def test_j_of_a_missing_plugin_is_looked_for_when_tried(flags, tmp_path, run_agefast):
    # As age's -j (plugin.NewIdentityWithoutData): the plugin is looked for when its identity is tried, after
    # the native ones. `-i key.txt -j NAME` had been refused before the file was read, where key.txt opens it.
    native = agefast.x25519.Identity.generate()
    (tmp_path / "key.txt").write_text(f"{native}\n")
    args = [str(tmp_path / "key.txt") if flag == "KEY" else flag for flag in flags]
    result = run_agefast("-d", *args, input=agefast.encrypt(b"opened", [native.to_public()]))
    if "-i" not in flags:
        assert result.returncode == 1
        assert result.stderr.splitlines()[0] == b'agefast: error: "nosuchplugin" plugin not found'
        assert b"agefast: hint: visit https://age-encryption.org/awesome#plugins" in result.stderr
    else:
        assert (result.returncode, result.stdout) == (0, b"opened"), result.stderr


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_identity_file_of_a_missing_plugin(tmp_path, run_agefast, newline):
    """A plugin identity in an -i file whose plugin is not installed: age's hint and page (a CRLF line too,
    which age's scanner reads as it reads LF: it had been "could not find age-plugin-..." with no hint)."""
    identity = tmp_path / "plugin-key.txt"
    identity.write_bytes((bech32.encode("AGE-PLUGIN-NOSUCHPLUGIN-", b"data").upper() + newline).encode())
    encrypted = agefast.encrypt(b"x", [agefast.x25519.Identity.generate().to_public()])
    # -e -i too, which encrypts to the identity's recipient (it had said "encryption failed", with no hint)
    for result in (run_agefast("-d", "-i", identity, input=encrypted), run_agefast("-e", "-i", identity, input=b"x")):
        assert result.returncode == 1
        assert result.stderr.splitlines()[0] == b'agefast: error: "nosuchplugin" plugin not found'
        assert b'agefast: hint: you might want to install the "nosuchplugin" plugin' in result.stderr
        assert b"agefast: hint: visit https://age-encryption.org/awesome#plugins" in result.stderr


@pytest.mark.parametrize("order", ["plugin first", "native first"])
def test_an_identity_file_opens_with_its_native_key_where_its_plugin_is_missing(tmp_path, run_agefast, order):
    """As age 1.3: a plugin identity's plugin is looked for when the identity is tried, and age tries its own
    identities first. The whole file had been refused ("plugin not found"): a YubiKey identity and an X25519
    backup key in one file, on a machine without the plugin."""
    native = agefast.x25519.Identity.generate()
    plugin_line = bech32.encode("AGE-PLUGIN-NOSUCHPLUGIN-", b"data").upper()
    lines = [plugin_line, str(native)] if order == "plugin first" else [str(native), plugin_line]
    identity = tmp_path / "keys.txt"
    identity.write_text("\n".join(lines) + "\n")
    result = run_agefast("-d", "-i", identity, input=agefast.encrypt(b"opened", [native.to_public()]))
    assert (result.returncode, result.stdout) == (0, b"opened"), result.stderr
    assert [type(i).__name__ for i in agefast.parse_identities(identity.read_text())] == \
        (["IdentityPluginV1", "Identity"] if order == "plugin first" else ["Identity", "IdentityPluginV1"])


@pytest.mark.parametrize("kind", ["identities", "recipients", "recipient"])
def test_a_missing_plugin_is_named_only_where_it_is_the_error(kind, tmp_path, run_agefast):
    # A typo on one line of a file that also names a plugin not installed had been "plugin not found", and
    # so had a plugin key that is no Bech32: age tells the line's own error.
    if kind == "identities":
        (tmp_path / "k").write_text("AGE-SECRET-KEY-1QQQQ\n" + bech32.encode("AGE-PLUGIN-NOSUCHPLUGIN-", b"d").upper())
        args = ["-d", "-i", tmp_path / "k"]
    elif kind == "recipients":
        (tmp_path / "k").write_text("age1qqqq\n" + bech32.encode("age1nosuchplugin", b"d") + "\n")
        args = ["-R", tmp_path / "k"]
    else:
        args = ["-r", "age1nosuchplugin1notbech32"]
    result = run_agefast(*args, input=b"x")
    assert result.returncode == 1
    assert b"plugin not found" not in result.stderr and b"hint" not in result.stderr
    assert b"line 1" in result.stderr or b"Bech32" in result.stderr


@pytest.mark.requires_tool("ssh-keygen")
def test_a_protected_pem_key_from_standard_input_asks_for_a_file_not_for_dash_pub(tmp_path, run_agefast):
    # "-.pub" is never read for -i -: the hint named a file that could not help. age's words.
    subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-m", "PEM", "-N", "pwpwpw", "-f", tmp_path / "k"],
                   check=True)
    (tmp_path / "f.age").write_bytes(agefast.encrypt(b"x", [agefast.x25519.Identity.generate().to_public()]))
    result = run_agefast("-d", "-i", "-", tmp_path / "f.age", input=(tmp_path / "k").read_bytes())
    assert result.returncode == 1
    assert b'use a file whose ".pub" file exists' in result.stderr and b"-.pub" not in result.stderr


def test_a_recipients_file_error_does_not_show_the_line(tmp_path, run_agefast):
    # age hides it: a line of a recipients file may be a secret pasted there.
    (tmp_path / "r").write_text("ssh-hunter2 AAAAB3NzaC1yc2E\n")
    result = run_agefast("-R", tmp_path / "r", input=b"x")
    assert result.returncode == 1
    assert b"line 1" in result.stderr and b"hunter2" not in result.stderr


def test_key_pub_beside_a_key_that_needs_none_is_not_read(ssh_keys, tmp_path, run_agefast):
    # `age-keygen -y key > key.pub` is a common layout: agefast had read key.pub for every -i key and failed
    # ("invalid SSH recipient"), where age reads it only for a protected PEM key.
    native = agefast.x25519.Identity.generate()
    key = tmp_path / "key"
    key.write_text(f"{native}\n")
    (tmp_path / "key.pub").write_text(f"{native.to_public()}\n")
    ssh = tmp_path / "ssh"
    ssh.write_bytes(ssh_keys["ed25519"].read_bytes())
    (tmp_path / "ssh.pub").write_text("stale garbage\n")
    for path, recipient in ((key, native.to_public()), (ssh, public_line(ssh_keys["ed25519"]).strip())):
        encrypted = agefast.encrypt(b"either", [agefast.keys.parse_recipient(str(recipient))])
        result = run_agefast("-d", "-i", path, input=encrypted)
        assert (result.returncode, result.stdout) == (0, b"either"), result.stderr
        assert run_agefast("-e", "-i", path, input=b"to myself").returncode == 0


def test_a_plugin_asks_for_a_value_and_a_choice_on_the_terminal(on_path, tmp_path, tty_run):
    # age asks for both on the terminal; agefast had answered `fail` to each, and such a plugin could not run.
    recipient = bech32.encode("age1agefasttest", b"ask")
    result = tty_run([*AGEFAST, "-r", recipient, "-o", tmp_path / "f.age", "/dev/null"],
                     [(b"your name?", "me"), (b'carry on? (press [1] for "go" or [2] for "stop")', "1")])
    assert result.returncode == 0, result.transcript
    refused = tty_run([*AGEFAST, "-r", recipient, "-o", tmp_path / "g.age", "/dev/null"],
                      [(b"your name?", "me"), (b"carry on?", "2")])
    assert refused.returncode == 1 and not (tmp_path / "g.age").exists()


@pytest.mark.parametrize("flag, text", [
    ("-R", "age1" + "q" * 9000 + "\n"),                                  # age's 8 KiB recipient line
    ("-R", "# " + "x" * (64 << 10) + "\nage1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\n"),
    ("-i", "AGE-SECRET-KEY-1" + "Q" * (64 << 10) + "\n"),               # age's scanner: 64 KiB a line
], ids=["recipient-9000", "comment-64k", "identity-64k"])
def test_a_key_file_line_longer_than_age_takes_is_refused(flag, text, tmp_path, run_agefast):
    # A 16 MiB line had taken ~7 s and ~370 MB to be refused as a bad checksum.
    path = tmp_path / "keys.txt"
    path.write_text(text)
    args = ["-R", path] if flag == "-R" else ["-d", "-i", path]
    done = run_agefast(*args, input=b"")
    assert done.returncode == 1 and f"{path}: line 1 is too long".encode() in done.stderr, done.stderr


def test_a_long_comment_not_in_utf8_is_counted_in_its_bytes(tmp_path, run_agefast):
    # 25,001 bytes of Latin-1: well under age's 64 KiB a line, but three times that counted as U+FFFD
    path = tmp_path / "recipients.txt"
    path.write_bytes(b"#" + b"\xe9" * 25000 + b"\nage1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\n")
    done = run_agefast("-R", path, input=b"x")
    assert done.returncode == 0, done.stderr
