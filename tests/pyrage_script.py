"""A script written against pyrage's API, run unchanged on pyrage and on agefast.

PYRAGE_IMPL=agefast runs it as `import agefast as pyrage`. argv[1] is a folder
of SSH keys (ssh_keys.py names); age-plugin-agefasttest must be on PATH.
Everything printed is deterministic, so the two runs' outputs must be equal.
"""

import io
import os
import sys
import tempfile

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, mlkem

if os.environ.get("PYRAGE_IMPL") == "agefast":
    import agefast as pyrage
else:
    import pyrage

KEYS = sys.argv[1]
IDENTITY = "AGE-SECRET-KEY-1WAF9EZSDS56Z0VWWFVGZF8P9JTX7YG88ZGR26TWCXRA8S8RPZ7ZSTQEYKE"
PLUGIN_RECIPIENT = "age1agefasttest1v9nk2enpwd68getnwssxketekfhsn2"  # data "agefasttest key"
PLUGIN_IDENTITY = "AGE-PLUGIN-AGEFASTTEST-1V9NK2ENPWD68GETNWSSXKETE6QM20Z"


def show(label, function):
    """Print what `function` returns, or the name of the pyrage error it raises."""
    try:
        result = function()
    except (pyrage.EncryptError, pyrage.DecryptError, pyrage.RecipientError, pyrage.IdentityError) as e:
        # Report by pyrage's names (agefast's may be subclasses of them).
        names = [n for n in ("EncryptError", "DecryptError", "RecipientError", "IdentityError")
                 if isinstance(e, getattr(pyrage, n))]
        result = f"raised {names[0]}"
    print(f"{label}: {result}")


def read(name, mode="rb"):
    with open(os.path.join(KEYS, name), mode) as f:
        return f.read()


class Callbacks:
    def __init__(self):
        self.messages = []

    def display_message(self, message):
        self.messages.append(message)

    def confirm(self, message, yes_string, no_string):
        return True

    def request_public_string(self, description):
        return None

    def request_passphrase(self, description):
        return None


def x25519_and_errors():
    identity = pyrage.x25519.Identity.from_str(IDENTITY)
    show("public key", lambda: str(identity.to_public()))
    show("identity round trip", lambda: str(pyrage.x25519.Identity.from_str(str(identity))) == IDENTITY)
    fresh = pyrage.x25519.Identity.generate()
    both = [identity.to_public(), fresh.to_public()]
    show("decrypt", lambda: pyrage.decrypt(pyrage.encrypt(b"hello", both), [fresh]))
    armored = pyrage.encrypt(b"armored", [identity.to_public()], armored=True)
    show("armored header", lambda: armored.splitlines()[0])
    show("decrypt armored", lambda: pyrage.decrypt(armored, [identity]))
    show("wrong identity", lambda: pyrage.decrypt(pyrage.encrypt(b"x", [fresh.to_public()]), [identity]))
    show("no recipients", lambda: pyrage.encrypt(b"x", []))
    show("garbage file", lambda: pyrage.decrypt(b"not an age file", [identity]))
    show("bad recipient", lambda: pyrage.x25519.Recipient.from_str("age1notakey"))
    show("bad identity", lambda: pyrage.x25519.Identity.from_str("AGE-SECRET-KEY-1NOTAKEY"))
    show("recipient str", lambda: str(pyrage.x25519.Recipient.from_str(str(identity.to_public()))))


def passphrases():
    encrypted = pyrage.passphrase.encrypt(b"by passphrase", "hunter2")
    show("passphrase", lambda: pyrage.passphrase.decrypt(encrypted, "hunter2"))
    show("wrong passphrase", lambda: pyrage.passphrase.decrypt(encrypted, "hunter3"))


def files_and_streams():
    identity = pyrage.x25519.Identity.from_str(IDENTITY)
    with tempfile.TemporaryDirectory() as d:
        plain, sealed, opened = (os.path.join(d, n) for n in ("plain", "sealed", "opened"))
        with open(plain, "wb") as f:
            f.write(b"a file" * 10_000)
        pyrage.encrypt_file(plain, sealed, [identity.to_public()])
        pyrage.decrypt_file(sealed, opened, [identity])
        with open(opened, "rb") as f:
            show("file round trip", lambda: f.read() == b"a file" * 10_000)
    sealed, opened = io.BytesIO(), io.BytesIO()
    pyrage.encrypt_io(io.BytesIO(b"a stream"), sealed, [identity.to_public()], armored=True)
    sealed.seek(0)
    pyrage.decrypt_io(sealed, opened, [identity])
    show("stream round trip", opened.getvalue)


def ssh_keys():
    for name in ("ed25519", "rsa2048"):
        recipient = pyrage.ssh.Recipient.from_str(read(name + ".pub", "r"))
        identity = pyrage.ssh.Identity.from_buffer(read(name))
        show(f"ssh {name}", lambda: pyrage.decrypt(pyrage.encrypt(b"to ssh", [recipient]), [identity]))
    show("ssh protected key", lambda: pyrage.ssh.Identity.from_buffer(read("ed25519-protected")))
    show("ssh bad key", lambda: pyrage.ssh.Identity.from_buffer(b"not a key"))
    show("ssh bad recipient", lambda: pyrage.ssh.Recipient.from_str("ssh-ed25519 AAAA"))
    show("ssh too small", lambda: pyrage.ssh.Recipient.from_str(read("rsa1024.pub", "r")))
    mixed = [pyrage.ssh.Recipient.from_str(read("ed25519.pub", "r")),
             pyrage.x25519.Identity.from_str(IDENTITY).to_public()]
    show("ssh with x25519", lambda: pyrage.decrypt(pyrage.encrypt(b"mixed", mixed),
                                                   [pyrage.x25519.Identity.from_str(IDENTITY)]))


def plugins():
    recipient = pyrage.plugin.Recipient.from_str(PLUGIN_RECIPIENT)
    identity = pyrage.plugin.Identity.from_str(PLUGIN_IDENTITY)
    show("plugin names", lambda: (recipient.plugin(), identity.plugin(), str(recipient) == PLUGIN_RECIPIENT))
    show("plugin default identity", lambda: str(pyrage.plugin.Identity.default_for_plugin("agefasttest")))
    show("plugin bad name", lambda: pyrage.plugin.Identity.default_for_plugin("../evil"))
    show("plugin bad recipient", lambda: pyrage.plugin.Recipient.from_str("invalid~~~"))
    show("plugin identity as recipient", lambda: pyrage.plugin.Recipient.from_str(PLUGIN_IDENTITY))
    show("plugin missing", lambda: pyrage.plugin.RecipientPluginV1("nosuchplugin", [], [], Callbacks()))
    callbacks = Callbacks()
    wrapper = pyrage.plugin.RecipientPluginV1("agefasttest", [recipient], [], callbacks)
    unwrapper = pyrage.plugin.IdentityPluginV1("agefasttest", [identity], callbacks)
    show("plugin round trip", lambda: pyrage.decrypt(pyrage.encrypt(b"plugged", [wrapper]), [unwrapper]))
    show("plugin first message", lambda: callbacks.messages[0])


def tags():
    point = ec.derive_private_key(20250101, ec.SECP256R1()).public_key()
    compressed = point.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint)
    uncompressed = point.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    kem = mlkem.MLKEM768PrivateKey.from_seed_bytes(bytes(range(64))).public_key().public_bytes_raw()
    # Bech32 strings for those keys, made by agefast's encoder (the script's
    # input, the same for both runs).
    from agefast.format import bech32

    for module, text in (("tag", bech32.encode("age1tag", compressed)),
                         ("tagpq", bech32.encode("age1tagpq", kem + uncompressed))):
        recipient = getattr(pyrage, module).Recipient.from_str(text)
        show(f"{module} str", lambda: str(recipient) == text)
        show(f"{module} encrypts", lambda: pyrage.encrypt(b"x", [recipient]).startswith(b"age-encryption.org/v1"))
        show(f"{module} bad", lambda: getattr(pyrage, module).Recipient.from_str("badprefix"))


for section in (x25519_and_errors, passphrases, files_and_streams, ssh_keys, plugins, tags):
    section()
