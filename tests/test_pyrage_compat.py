"""pyrage compatibility: the same script on both libraries, the same API surface,
and each library opening the other's SSH files."""

import inspect
import io
import os
import pathlib
import subprocess
import sys

import pyrage
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, mlkem
from ssh_keys import public_line, ssh_keys  # noqa: F401 (a fixture)
from test_plugin import on_path  # noqa: F401 (a fixture)

import agefast
from agefast.format import bech32

SCRIPT = pathlib.Path(__file__).parent / "pyrage_script.py"
MODULES = ["x25519", "ssh", "passphrase", "plugin", "tag", "tagpq"]


def test_pyrage_script_gives_the_same_output(ssh_keys, on_path):
    outputs = {}
    for impl in ("pyrage", "agefast"):
        result = subprocess.run([sys.executable, SCRIPT, ssh_keys["ed25519"].parent], capture_output=True,
                                text=True, timeout=300, env={**os.environ, "PYRAGE_IMPL": impl})
        assert result.returncode == 0, result.stderr
        outputs[impl] = result.stdout
    assert outputs["agefast"] == outputs["pyrage"]
    assert "plugin round trip: b'plugged'" in outputs["agefast"]


def test_every_pyrage_name_exists():
    # pyrage.pyrage is its compiled extension module, not API.
    missing = [name for name in dir(pyrage)
               if not name.startswith("_") and name != "pyrage" and not hasattr(agefast, name)]
    for module in MODULES:
        theirs, ours = getattr(pyrage, module), getattr(agefast, module)
        for name in dir(theirs):
            if name.startswith("_"):
                continue
            if not hasattr(ours, name):
                missing.append(f"{module}.{name}")
            elif inspect.isclass(getattr(theirs, name)):
                missing += [f"{module}.{name}.{m}" for m in dir(getattr(theirs, name))
                            if not m.startswith("_") and not hasattr(getattr(ours, name), m)]
    assert missing == []


@pytest.mark.parametrize("key", ["ed25519", "rsa2048"])
def test_ssh_files_cross(key, ssh_keys, make_plaintext):
    plaintext = make_plaintext(200_000)
    line, private = public_line(ssh_keys[key]), ssh_keys[key].read_bytes()
    theirs = pyrage.encrypt(plaintext, [pyrage.ssh.Recipient.from_str(line)])
    assert agefast.decrypt(theirs, [agefast.ssh.Identity.from_buffer(private)]) == plaintext
    ours = agefast.encrypt(plaintext, [agefast.ssh.Recipient.from_str(line)])
    assert pyrage.decrypt(ours, [pyrage.ssh.Identity.from_buffer(private)]) == plaintext


def _pyrage_callables():
    """(dotted name, pyrage's callable, agefast's) for every public function and method of pyrage."""
    for name in ("encrypt", "decrypt", "encrypt_io", "decrypt_io", "encrypt_file", "decrypt_file"):
        yield name, getattr(pyrage, name), getattr(agefast, name)
    for module in MODULES:
        theirs, ours = getattr(pyrage, module), getattr(agefast, module)
        for name in dir(theirs):
            if name.startswith("_"):
                continue
            item = getattr(theirs, name)
            if inspect.isclass(item):
                for method in dir(item):
                    if not method.startswith("_"):
                        yield f"{module}.{name}.{method}", getattr(item, method), getattr(getattr(ours, name), method)
            elif callable(item):
                yield f"{module}.{name}", item, getattr(ours, name)


def _parameters(function):
    return [p for p in inspect.signature(function).parameters.values() if p.name != "self"]


CALLABLES = {name: (theirs, ours) for name, theirs, ours in _pyrage_callables()}


@pytest.mark.parametrize("name", CALLABLES)
def test_parameters_are_pyrages(name):
    # pyrage's parameters, by name, position and default, so that keyword
    # calls (from_str(v=...), from_buffer(buf=...)) work; agefast's own
    # additions come after them and have defaults.
    theirs, ours = (_parameters(f) for f in CALLABLES[name])
    assert [(p.name, p.default) for p in ours[:len(theirs)]] == [(p.name, p.default) for p in theirs]
    assert all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in ours[:len(theirs)])
    assert all(p.default is not p.empty for p in ours[len(theirs):])


def _isolated(message: str) -> str:
    # rage's messages (Fluent) wrap interpolated values in Unicode isolates.
    return message.replace("\u2068", "").replace("\u2069", "")



def _tag_recipients():
    """A p256tag and an mlkem768p256tag recipient string (made with agefast's encoder)."""
    point = ec.derive_private_key(20250101, ec.SECP256R1()).public_key()
    compressed = point.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint)
    uncompressed = point.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    kem = mlkem.MLKEM768PrivateKey.from_seed_bytes(bytes(range(64))).public_key().public_bytes_raw()
    return bech32.encode("age1tag", compressed), bech32.encode("age1tagpq", kem + uncompressed)


TAG, TAGPQ = _tag_recipients()
ECDSA = ("ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBEmKSENjQEezOmxkZMy7opKgwFB9"
         "nkt5YRrYMjNuG5N87uRgg6CLrbo5wAdT/y6v0mKV0U2w0WZ2YB/++Tpockg=")


def _wrong_identity(lib):
    ct = lib.encrypt(b"x", [lib.x25519.Identity.generate().to_public()])
    lib.decrypt(ct, [lib.x25519.Identity.generate()])


# (what, call(lib), pyrage's exception, a fragment of pyrage's message)
FAILURES = [
    ("no recipients", lambda lib: lib.encrypt(b"x", []), "EncryptError", "Missing recipients"),
    ("no recipients, io", lambda lib: lib.encrypt_io(io.BytesIO(b"x"), io.BytesIO(), []), "EncryptError",
     "Missing recipients"),
    ("wrong identity", _wrong_identity, "DecryptError", "No matching keys found"),
    ("no identities", lambda lib: lib.decrypt(lib.encrypt(b"x", [lib.x25519.Identity.generate().to_public()]), []),
     "DecryptError", "No matching keys found"),
    ("passphrase for an X25519 file",
     lambda lib: lib.passphrase.decrypt(lib.encrypt(b"x", [lib.x25519.Identity.generate().to_public()]), "pw"),
     "DecryptError", "No matching keys found"),
    ("post-quantum with classic",
     lambda lib: lib.encrypt(b"x", [lib.tagpq.Recipient.from_str(TAGPQ), lib.x25519.Identity.generate().to_public()]),
     "EncryptError", "Cannot encrypt to a recipient with labels 'postquantum' alongside a recipient with no labels"),
    ("classic with post-quantum",
     lambda lib: lib.encrypt(b"x", [lib.tag.Recipient.from_str(TAG), lib.tagpq.Recipient.from_str(TAGPQ)]),
     "EncryptError", "Cannot encrypt to a recipient with labels 'postquantum' alongside a recipient with no labels"),
    ("x25519 identity, not Bech32", lambda lib: lib.x25519.Identity.from_str("BAD-PREFIX"), "IdentityError",
     "invalid Bech32 encoding"),
    ("x25519 identity, bad checksum", lambda lib: lib.x25519.Identity.from_str(SECRET[:-1] + "Q"), "IdentityError",
     "invalid Bech32 encoding"),
    ("x25519 identity, a recipient", lambda lib: lib.x25519.Identity.from_str(PUBLIC), "IdentityError",
     "incorrect HRP"),
    ("x25519 recipient, not Bech32", lambda lib: lib.x25519.Recipient.from_str("badprefix"), "RecipientError",
     "invalid Bech32 encoding"),
    ("x25519 recipient, empty", lambda lib: lib.x25519.Recipient.from_str(""), "RecipientError",
     "invalid Bech32 encoding"),
    ("x25519 recipient, an identity", lambda lib: lib.x25519.Recipient.from_str(SECRET), "RecipientError",
     "incorrect HRP"),
    ("tag recipient, not Bech32", lambda lib: lib.tag.Recipient.from_str("badprefix"), "RecipientError",
     "invalid Bech32 encoding"),
    ("tag recipient, an X25519 one", lambda lib: lib.tag.Recipient.from_str(PUBLIC), "RecipientError",
     "incorrect HRP"),
    ("tagpq recipient, not Bech32", lambda lib: lib.tagpq.Recipient.from_str("badprefix"), "RecipientError",
     "invalid Bech32 encoding"),
    ("ssh recipient, malformed", lambda lib: lib.ssh.Recipient.from_str("invalid ssh pubkey"), "RecipientError",
     "invalid SSH recipient"),
    ("ssh recipient, ecdsa", lambda lib: lib.ssh.Recipient.from_str(ECDSA), "RecipientError", "ecdsa-sha2-nistp256"),
    ("ssh identity, malformed", lambda lib: lib.ssh.Identity.from_buffer(b"not a key"), "IdentityError",
     "invalid SSH identity"),
    ("plugin identity, not Bech32", lambda lib: lib.plugin.Identity.from_str("invalid~~~"), "IdentityError",
     "invalid Bech32 encoding"),
    ("plugin recipient, not Bech32", lambda lib: lib.plugin.Recipient.from_str("invalid~~~"), "RecipientError",
     "invalid Bech32 encoding"),
    ("plugin identity, an X25519 one", lambda lib: lib.plugin.Identity.from_str(SECRET), "IdentityError",
     "invalid HRP"),
    ("plugin recipient, an X25519 one", lambda lib: lib.plugin.Recipient.from_str(PUBLIC), "RecipientError",
     "invalid HRP"),
    ("plugin name", lambda lib: lib.plugin.Identity.default_for_plugin("invalid~~~name"), "IdentityError",
     "Invalid plugin name 'invalid~~~name'"),
    ("plugin not installed", lambda lib: lib.plugin.RecipientPluginV1("nosuchplugin", [], [], None), "EncryptError",
     "age-plugin-nosuchplugin"),
]
SECRET = "AGE-SECRET-KEY-1WAF9EZSDS56Z0VWWFVGZF8P9JTX7YG88ZGR26TWCXRA8S8RPZ7ZSTQEYKE"
PUBLIC = str(agefast.x25519.Identity.from_str(SECRET).to_public())


@pytest.mark.parametrize("lib", [pyrage, agefast], ids=["pyrage", "agefast"])
@pytest.mark.parametrize("what, call, error, fragment", FAILURES, ids=[f[0] for f in FAILURES])
def test_failures_raise_pyrages_error_and_words(lib, what, call, error, fragment):
    # Run on pyrage too, so that the expectation is pyrage's behaviour.
    with pytest.raises(getattr(lib, error)) as info:
        call(lib)
    assert fragment in _isolated(str(info.value))


# Calls with an argument of the wrong type: pyrage's PyO3 conversions raise
# TypeError for each, before doing anything.
WRONG_TYPES = [
    ("str plaintext", lambda lib, r, i: lib.encrypt("text", [r])),
    ("identity as recipient", lambda lib, r, i: lib.encrypt(b"x", [i])),
    ("recipient, not a list", lambda lib, r, i: lib.encrypt(b"x", r)),
    ("armored as str", lambda lib, r, i: lib.encrypt(b"x", [r], armored="yes")),
    ("armored as int", lambda lib, r, i: lib.encrypt(b"x", [r], armored=1)),
    ("str ciphertext", lambda lib, r, i: lib.decrypt("text", [i])),
    ("recipient as identity", lambda lib, r, i: lib.decrypt(lib.encrypt(b"x", [r]), [r])),
    ("str reader", lambda lib, r, i: lib.encrypt_io("test", io.BytesIO(), [r])),
    ("str writer", lambda lib, r, i: lib.encrypt_io(io.BytesIO(b"x"), "test", [r])),
    ("decrypt str reader", lambda lib, r, i: lib.decrypt_io("test", io.BytesIO(), [i])),
    ("decrypt str writer", lambda lib, r, i: lib.decrypt_io(io.BytesIO(), "test", [i])),
    ("int infile", lambda lib, r, i: lib.encrypt_file(0, "/nonexistent/out", [r])),
    ("int outfile", lambda lib, r, i: lib.decrypt_file("/nonexistent/in", 1, [i])),
    ("bytes recipient string", lambda lib, r, i: lib.x25519.Recipient.from_str(str(r).encode())),
    ("None identity string", lambda lib, r, i: lib.x25519.Identity.from_str(None)),
    ("bytes ssh recipient", lambda lib, r, i: lib.ssh.Recipient.from_str(b"ssh-ed25519 AAAA")),
    ("str ssh identity", lambda lib, r, i: lib.ssh.Identity.from_buffer("not bytes")),
    ("bytes plugin recipient", lambda lib, r, i: lib.plugin.Recipient.from_str(b"age1x")),
    ("str passphrase plaintext", lambda lib, r, i: lib.passphrase.encrypt("text", "pw")),
]


@pytest.mark.parametrize("lib", [pyrage, agefast], ids=["pyrage", "agefast"])
@pytest.mark.parametrize("what, call", WRONG_TYPES, ids=[w[0] for w in WRONG_TYPES])
def test_wrong_types_are_type_errors_as_in_pyrage(lib, what, call):
    identity = lib.x25519.Identity.generate()
    with pytest.raises(TypeError):
        call(lib, identity.to_public(), identity)


def test_keyword_calls_written_for_pyrage():
    identity = agefast.x25519.Identity.from_str(v=SECRET)
    recipient = agefast.x25519.Recipient.from_str(v=PUBLIC)
    ct = agefast.encrypt(plaintext=b"kw", recipients=[recipient], armored=True)
    assert agefast.decrypt(ciphertext=ct, identities=[identity]) == b"kw"
    assert str(agefast.tag.Recipient.from_str(v=TAG)) == TAG
    assert agefast.plugin.Identity.default_for_plugin(plugin="x").plugin() == "x"


def _into(out, tmp_path):
    identity = agefast.x25519.Identity.generate()
    src = tmp_path / "plain"
    src.write_bytes(b"plaintext")
    agefast.encrypt_file(src, out, [identity.to_public()])
    agefast.decrypt_file(out, tmp_path / "back", [identity])
    assert (tmp_path / "back").read_bytes() == b"plaintext"


# pyrage's encrypt_file / decrypt_file write into an existing outfile (File::create): it needs no permission on
# the folder, and a file bind-mounted into a container takes no rename.
def test_an_outfile_in_a_folder_that_takes_no_new_file_is_written_into(refusing_folder, tmp_path):
    _into(refusing_folder / "out", tmp_path)


def test_a_bind_mounted_outfile_is_written_into(bind_mounted_file, tmp_path):
    _into(bind_mounted_file[0], tmp_path)


class _Parts:
    """A writer that keeps what it is given, and treats it as bytes (a list of parts for an uploader)."""

    def __init__(self):
        self.parts = []

    def write(self, b):
        self.parts.append(b.decode("latin-1"))
        return len(b)

    def value(self):
        return "".join(self.parts).encode("latin-1")


@pytest.mark.parametrize("lib", [pyrage, agefast])
def test_io_writers_that_keep_their_parts_get_bytes_of_their_own(lib):
    # agefast handed such a writer views of buffers it fills again: the parts kept changed under it (3 MB: a
    # plaintext that was not the file's, a file that did not decrypt), and a writer that decoded them failed.
    identity = lib.x25519.Identity.generate()
    data = os.urandom(3_000_000)
    out = _Parts()
    lib.encrypt_io(io.BytesIO(data), out, [identity.to_public()])
    assert pyrage.decrypt(out.value(), [pyrage.x25519.Identity.from_str(str(identity))]) == data
    back = _Parts()
    lib.decrypt_io(io.BytesIO(out.value()), back, [identity])
    assert back.value() == data


@pytest.mark.parametrize("lib", [pyrage, agefast])
def test_io_files_of_one_thread_are_used_on_the_calling_thread(lib):
    # agefast read and wrote them on threads of its own: sqlite refused its blob there, and a writer whose lock
    # the caller held waited for ever. (In a thread of the test's, so that a hang fails the test.)
    import sqlite3
    import threading

    identity = lib.x25519.Identity.generate()
    data = os.urandom(3_000_000)

    class Locked(io.RawIOBase):
        def __init__(self):
            self.lock = threading.RLock()
            self.out = bytearray()

        def writable(self):
            return True

        def write(self, b):
            with self.lock:
                self.out += b
            return len(b)

    out, done = Locked(), []

    def encrypt():
        db = sqlite3.connect(":memory:")
        db.execute("create table t(b blob)")
        db.execute("insert into t values (?)", (data,))
        with out.lock, db.blobopen("t", "b", 1, readonly=True) as blob:
            lib.encrypt_io(blob, out, [identity.to_public()])
        done.append(True)

    worker = threading.Thread(target=encrypt, daemon=True)
    worker.start()
    worker.join(60)
    assert done == [True], "encrypt_io raised or did not finish"
    assert pyrage.decrypt(bytes(out.out), [pyrage.x25519.Identity.from_str(str(identity))]) == data
