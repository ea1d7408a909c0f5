"""ssh-ed25519 and ssh-rsa: both ways with the Go age CLI, protected keys, bad keys.

Keys are made once per session with ssh-keygen (see ssh_keys.py).
"""

import base64
import struct
import subprocess

import pyrage
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from ssh_keys import PASSPHRASE, public_line as _public, ssh_keys  # noqa: F401 (a fixture)

import agefast
from agefast import errors, keys, ssh
from agefast.format.grammar import Stanza, b64encode
from agefast.recipients import sodium, x25519

PLAIN_KEYS = ["ed25519", "rsa2048", "rsa3072", "rsa4096", "rsa2048-pem", "rsa2047"]


@pytest.mark.requires_tool("age")
@pytest.mark.parametrize("name", PLAIN_KEYS)
def test_go_age_decrypts_ours(name, ssh_keys, tmp_path, make_plaintext):
    plaintext = make_plaintext(70_000)
    encrypted = tmp_path / "file.age"
    encrypted.write_bytes(agefast.encrypt(plaintext, [ssh.Recipient.from_str(_public(ssh_keys[name]))]))
    out = subprocess.run(["age", "-d", "-i", ssh_keys[name], encrypted], capture_output=True, check=True)
    assert out.stdout == plaintext


@pytest.mark.requires_tool("age")
@pytest.mark.parametrize("name", PLAIN_KEYS)
def test_we_decrypt_go_age(name, ssh_keys, tmp_path, make_plaintext):
    plaintext = make_plaintext(70_000, seed=1)
    source = tmp_path / "plain"
    source.write_bytes(plaintext)
    public = ssh_keys[name].with_name(ssh_keys[name].name + ".pub")
    encrypted = subprocess.run(["age", "-R", public, source], capture_output=True, check=True).stdout
    identity = ssh.Identity.from_buffer(ssh_keys[name].read_bytes())
    assert agefast.decrypt(encrypted, [identity]) == plaintext
    assert identity.to_public() == ssh.Recipient.from_str(_public(ssh_keys[name]))


@pytest.mark.requires_tool("age")
@pytest.mark.parametrize("name", ["ed25519-protected", "rsa-protected"])
def test_protected_key_with_go_age(name, ssh_keys, tmp_path, tty_run):
    key = ssh_keys[name]
    recipient = ssh.Recipient.from_str(_public(key))
    ours = tmp_path / "ours.age"
    ours.write_bytes(agefast.encrypt(b"to a protected key", [recipient]))
    # Go age reads the key's passphrase from /dev/tty.
    result = tty_run(["age", "-d", "-i", key, "-o", tmp_path / "out", ours], [(b"passphrase", PASSPHRASE)])
    assert result.returncode == 0, result.transcript
    assert (tmp_path / "out").read_bytes() == b"to a protected key"

    theirs = subprocess.run(["age", "-r", _public(key).strip()], input=b"from go", capture_output=True,
                            check=True).stdout
    assert agefast.decrypt(theirs, [ssh.Identity.from_buffer(key.read_bytes(), PASSPHRASE)]) == b"from go"


def test_protected_key_prompts_only_for_its_own_stanzas(ssh_keys):
    key = ssh_keys["ed25519-protected"]
    asked = []

    def passphrase(prompt):
        asked.append(prompt)
        return PASSPHRASE

    [identity] = keys.load_identities(key.read_bytes(), name="id_test", passphrase=passphrase)
    other = agefast.encrypt(b"x", [ssh.Recipient.from_str(_public(ssh_keys["ed25519"]))])
    with pytest.raises(errors.NoIdentityMatchError):
        agefast.decrypt(other, [identity])
    assert asked == []
    mine = agefast.encrypt(b"mine", [identity.to_public()])
    assert agefast.decrypt(mine, [identity]) == b"mine"
    assert agefast.decrypt(mine, [identity]) == b"mine"
    assert asked == ['Enter passphrase for "id_test":']


def test_protected_key_errors(ssh_keys):
    data = ssh_keys["rsa-protected"].read_bytes()
    with pytest.raises(ssh.PassphraseNeededError, match="passphrase-protected"):
        ssh.Identity.from_buffer(data)
    with pytest.raises(agefast.IdentityError, match="wrong passphrase"):
        ssh.Identity.from_buffer(data, "not it")


def test_a_corrupt_key_that_is_not_protected_is_an_identity_error_with_a_passphrase_too(ssh_keys):
    # Given a passphrase, a key that has none was loaded again without one, outside the error mapping: a bare
    # ValueError ("Corrupt data: ed25519 field mismatch") for a corrupt key.
    lines = ssh_keys["ed25519"].read_bytes().split(b"\n")
    blob = bytearray(base64.b64decode(b"".join(lines[1:-2])))
    blob[65] ^= 1       # in the public key, which the private section repeats
    data = b"\n".join([lines[0], base64.b64encode(blob), lines[-2], b""])
    for passphrase in (None, "pw"):
        with pytest.raises(agefast.IdentityError, match="malformed SSH private key"):
            ssh.Identity.from_buffer(data, passphrase)


def test_ed25519_conversion_matches_the_private_key(ssh_keys):
    # The recipient's Montgomery form of the Ed25519 point must be the X25519
    # public key of the scalar derived from the private seed.
    identity = ssh.Identity.from_buffer(ssh_keys["ed25519"].read_bytes())
    assert ssh.Recipient.from_str(_public(ssh_keys["ed25519"]))._x25519 == identity._x25519


@pytest.fixture(params=["cryptography", "libsodium"])
def share_route(request, monkeypatch):
    """Ephemeral shares made before or after a process's switch to libsodium (agefast.recipients.x25519)."""
    monkeypatch.setattr(x25519, "SODIUM_AFTER", 0 if request.param == "libsodium" else 1 << 62)
    monkeypatch.setattr(sodium, "_bindings", None)


def test_ed25519_files_open_with_pyrage_and_the_kept_keys(share_route, ssh_keys):
    # The second file of each recipient and identity is made and opened with
    # the keys they kept from the first.
    recipient = ssh.Recipient.from_str(_public(ssh_keys["ed25519"]))
    identity = ssh.Identity.from_buffer(ssh_keys["ed25519"].read_bytes())
    theirs = pyrage.ssh.Identity.from_buffer(ssh_keys["ed25519"].read_bytes())
    for plaintext in (b"first", b"second"):
        sealed = agefast.encrypt(plaintext, [recipient])
        assert pyrage.decrypt(sealed, [theirs]) == plaintext
        assert agefast.decrypt(sealed, [identity]) == plaintext
    sealed = pyrage.encrypt(b"from pyrage", [pyrage.ssh.Recipient.from_str(_public(ssh_keys["ed25519"]))])
    assert agefast.decrypt(sealed, [identity]) == b"from pyrage"


def test_a_low_order_ed25519_key_fails_every_wrap(share_route):
    # y = -1: the Edwards point of order 2, whose Montgomery form is u = 0.
    key = ed25519.Ed25519PublicKey.from_public_bytes((2**255 - 20).to_bytes(32, "little"))
    recipient = ssh.Recipient(key)
    for _ in range(2):
        with pytest.raises(errors.EncryptError, match="ssh-ed25519 key or share is a low-order point"):
            agefast.encrypt(b"x", [recipient])


def test_an_ed25519_key_off_the_curve_is_refused():
    # As age (edwards25519's SetBytes): no private key has it, so a file encrypted to it could never be opened.
    p, d = 2**255 - 19, -121665 * pow(121666, -1, 2**255 - 19)
    y = next(y for y in range(2, 100) if pow((y * y - 1) * pow(d * y * y + 1, -1, p) % p, (p - 1) // 2, p) != 1)
    blob = b"\0\0\0\x0bssh-ed25519\0\0\0\x20" + y.to_bytes(32, "little")
    with pytest.raises(agefast.RecipientError, match="invalid point encoding"):
        ssh.Recipient.from_str(f"ssh-ed25519 {base64.b64encode(blob).decode()}")


@pytest.mark.parametrize("name", ["ed25519-protected", "rsa-protected"])
def test_a_stanza_of_a_protected_keys_type_without_its_tag_is_malformed(name, ssh_keys):
    # As age's EncryptedSSHIdentity: an error, not "no match", and the passphrase not asked for.
    [identity] = keys.load_identities(ssh_keys[name].read_bytes(), name="id", passphrase=lambda p: 1 / 0)
    with pytest.raises(errors.HeaderError, match=f"invalid {identity.to_public().type} stanza"):
        identity.unwrap([Stanza(identity.to_public().type, [], bytes(32))])


@pytest.mark.parametrize("name, problem", [("ecdsa-protected", "unsupported SSH key type"),
                                           ("rsa1024-protected", "1024 bits")])
def test_a_protected_key_age_cannot_use_is_an_identity_error(name, problem, ssh_keys):
    # Its public key was read as a recipient's, and its error was a RecipientError.
    with pytest.raises(agefast.IdentityError, match=problem):
        keys.load_identities(ssh_keys[name].read_bytes(), name="id", passphrase=lambda p: PASSPHRASE)


def test_stanza_for_our_key_that_does_not_open_is_fatal(ssh_keys):
    identity = ssh.Identity.from_buffer(ssh_keys["ed25519"].read_bytes())
    [stanza] = identity.to_public().wrap(bytes(16))
    broken = Stanza(stanza.type, stanza.args, bytes(32))
    with pytest.raises(errors.HeaderError, match="does not decrypt"):
        identity.unwrap([broken])
    other_tag = Stanza(stanza.type, [b64encode(b"\0\0\0\0"), stanza.args[1]], bytes(32))
    assert identity.unwrap([other_tag]) is None


@pytest.mark.parametrize("line, fragment", [
    ("ssh-ed25519", "expected `TYPE BASE64"),
    ("ssh-ed25519 AAAA", "malformed SSH public key"),
    ("ssh-ed25519 !!!notbase64", "malformed SSH public key"),
    ("ssh-foo AAAAB3NzaC1kc3M=", "unknown SSH key type"),
])
def test_bad_recipients(line, fragment):
    with pytest.raises(agefast.RecipientError, match=fragment) as e:
        ssh.Recipient.from_str(line)
    assert "\n" not in str(e.value)


# How an authorized_keys line may be written, as age reads it (Go's ssh.ParseAuthorizedKey and
# base64.StdEncoding): True where age takes the key. ssh-keygen's rsa3072 key ends in one "=".
_LINE_FORMS = [
    ("{t} {b} comment", True),
    ("{t}\t{b}", True),
    ("{t} \v{b}", True),             # after the separator, any of Go's spaces
    ("{t} {b}\f", True),
    ("{t} {b}\u00a0", True),
    ("{t} {b} \x00", True),          # the comment is not read
    ("{t} {b}\rjunk", True),         # Go's line ends at a CR
    ("{t} {b}=", False),              # padding past the key
    ("{t} {b}AAAA", False),           # data after the padding
    ("{t} {nopad}", False),           # padding missing
    ("{t} {b}\x00", False),
    ("{t} {b}\x1c", False),          # not a space to Go (it is to Python's strip)
    ("{t}\v{b}", False),             # fields end at a space or a tab only
    ("{t}\u00a0{b}", False),
    ("\u00a0{t} {b}", False),
    ("{t} {dot}", False),
]


def _line_form(form, ssh_keys):
    t, b = _public(ssh_keys["rsa3072"]).split()[:2]
    return form.format(t=t, b=b, nopad=b.rstrip("="), dot=f"{b[:8]}.{b[8:]}")


@pytest.mark.parametrize("form, taken", _LINE_FORMS)
def test_authorized_keys_lines_are_read_as_age_reads_them(form, taken, ssh_keys):
    line = _line_form(form, ssh_keys)
    if taken:
        assert agefast.parse_recipients(f"{line}\n")[0] == ssh.Recipient.from_str(_public(ssh_keys["rsa3072"]))
    else:
        with pytest.raises(agefast.RecipientError):
            agefast.parse_recipients(f"{line}\n", warn=pytest.fail)


@pytest.mark.requires_tool("age")
def test_authorized_keys_line_forms_are_go_ages(ssh_keys, tmp_path):
    for form, taken in _LINE_FORMS:
        (tmp_path / "recipients").write_text(_line_form(form, ssh_keys) + "\n")
        done = subprocess.run(["age", "-R", tmp_path / "recipients"], input=b"x", capture_output=True)
        assert (done.returncode == 0) == taken, (form, done.stderr)


def test_a_type_field_whose_blob_is_cut_short_is_malformed_not_skipped(ssh_keys):
    # age's sshKeyType reads all the type's bytes: a blob cut short is no SSH key to skip with a warning.
    cut = base64.b64encode(b"\x00\x00\x00\x64ssh-foo").decode()
    with pytest.raises(agefast.RecipientError, match="line 1"):
        agefast.parse_recipients(f"ssh-foo {cut}\n{_public(ssh_keys['ed25519'])}", warn=pytest.fail)


def test_an_rsa_key_over_16384_bits_is_refused():
    # Only a public key is needed: an odd modulus of 16392 bits (a key that size takes minutes to generate).
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    big = rsa.RSAPublicNumbers(65537, (1 << 16391) | 1).public_key()
    line = big.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    with pytest.raises(agefast.RecipientError, match="16392 bits; at most 16384"):
        ssh.Recipient.from_str(line)


def _rsa_line(e: int, n: int) -> str:
    """An ssh-rsa key line written field by field (RFC 4253's string and mpint), so that it may hold any
    exponent and modulus."""
    def string(data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + data

    def mpint(x: int) -> bytes:
        return string(x.to_bytes(x.bit_length() // 8 + 1, "big"))

    return "ssh-rsa " + base64.b64encode(string(b"ssh-rsa") + mpint(e) + mpint(n)).decode()


_ODD_MODULUS = (1 << 2047) | 1


@pytest.mark.parametrize("e, n, fragment", [
    (2**24 + 1, _ODD_MODULUS, "exponent is longer than 24 bits"),
    (2**100 + 1, _ODD_MODULUS, "exponent is longer than 24 bits"),
    (65537, _ODD_MODULUS + 1, "modulus is even"),
], ids=["25-bit-exponent", "101-bit-exponent", "even-modulus"])
def test_an_rsa_key_age_does_not_parse_or_openssl_cannot_encrypt_to_is_refused(e, n, fragment, tmp_path,
                                                                               run_agefast):
    # They had loaded, and the wrap failed with a bare ValueError ("Encryption failed"; the command, a
    # traceback) or, for a 25-bit exponent, made a file. Go's ssh.ParsePublicKey refuses an exponent over 24
    # bits, and age skips such a line of a recipients file as it skips any SSH key it cannot use.
    line = _rsa_line(e, n)
    with pytest.raises(agefast.RecipientError, match=fragment):
        ssh.Recipient.from_str(line)
    other = x25519.Identity.generate()
    warnings: list[str] = []
    assert agefast.parse_recipients(f"{line}\n{other.to_public()}\n", warn=warnings.append) == [other.to_public()]
    assert warnings == [f"ignoring line 1: invalid ssh-rsa public key: its {fragment}"]
    (tmp_path / "keys").write_text(f"{line}\n{other.to_public()}\n")
    result = run_agefast("-R", tmp_path / "keys", input=b"to the other key")
    assert result.returncode == 0, result.stderr
    assert agefast.decrypt(result.stdout, [other]) == b"to the other key"
    refused = run_agefast("-r", line, input=b"x")
    assert refused.returncode == 1 and b"Traceback" not in refused.stderr
    assert fragment.encode() in refused.stderr


def test_refused_key_types(ssh_keys):
    with pytest.raises(agefast.RecipientError, match="1024 bits; age requires a modulus of at least 256 bytes"):
        ssh.Recipient.from_str(_public(ssh_keys["rsa1024"]))
    with pytest.raises(agefast.IdentityError, match="1024 bits; age requires a modulus of at least 256 bytes"):
        ssh.Identity.from_buffer(ssh_keys["rsa1024"].read_bytes())
    with pytest.raises(ssh.UnsupportedKeyError, match="ecdsa"):
        ssh.Recipient.from_str(_public(ssh_keys["ecdsa"]))
    with pytest.raises(agefast.IdentityError, match="unsupported SSH key type"):
        ssh.Identity.from_buffer(ssh_keys["ecdsa"].read_bytes())
    # A key of the wrong type for its label: the blob says ed25519.
    blob = _public(ssh_keys["ed25519"]).split()[1]
    with pytest.raises(agefast.RecipientError, match="malformed SSH public key"):
        ssh.Recipient.from_str(f"ssh-rsa {blob}")


@pytest.mark.parametrize("data", [
    b"garbage",
    b"-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n",
    b"-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n",
])
def test_bad_identities(data):
    with pytest.raises(agefast.IdentityError, match="malformed SSH private key") as e:
        ssh.Identity.from_buffer(data)
    assert "\n" not in str(e.value)


def test_recipients_file_with_authorized_keys_lines(ssh_keys):
    text = "".join(_public(ssh_keys[name]) for name in ("ed25519", "rsa2048", "ecdsa"))
    with pytest.raises(errors.UnsupportedKeyError, match="line 3: unsupported SSH key type"):
        agefast.parse_recipients(text)
    warnings = []
    recipients = agefast.parse_recipients(text, warn=warnings.append)
    assert [r.type for r in recipients] == ["ssh-ed25519", "ssh-rsa"]
    assert warnings == ["ignoring line 3: unsupported SSH key type: 'ecdsa-sha2-nistp256'"]


def test_encrypted_identity_file_is_opened_at_first_use(ssh_keys):
    # An identity file encrypted to a passphrase, as `age -p key.txt` makes;
    # here holding an X25519 key (SSH keys are whole files, not lines).
    inner = agefast.x25519.Identity.generate()
    sealed = agefast.encrypt(f"# key\n{inner}\n".encode(), [agefast.passphrase.Recipient("pw", work_factor=10)],
                             armored=True)
    asked = []
    [identity] = keys.load_identities(sealed, name="key.age", passphrase=lambda p: asked.append(p) or "pw")
    assert asked == []
    assert agefast.decrypt(agefast.encrypt(b"ok", [inner.to_public()]), [identity]) == b"ok"
    assert identity.recipients() == [inner.to_public()]
    assert asked == ['Enter passphrase for identity file "key.age":']
    [wrong] = keys.load_identities(sealed, name="key.age", passphrase=lambda p: "nope")
    with pytest.raises(agefast.IdentityError, match="^identity file key.age: cannot decrypt it: incorrect passphrase$"):
        wrong.recipients()
    [empty] = keys.load_identities(sealed, name="key.age", passphrase=lambda p: "")     # as age: not tried
    with pytest.raises(agefast.IdentityError, match="^identity file key.age: cannot decrypt it: passphrase can't be"):
        empty.recipients()
