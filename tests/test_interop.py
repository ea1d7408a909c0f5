"""Interoperability with the Go age CLI (Debian's age 1.1.1) and pyrage, both ways.

agefast takes part through its Python API and through its command line; the
peers are the `age` binary and the pyrage module. Every file one side writes
must decrypt on the other, binary and armored, at sizes around the 64 KiB
chunk boundaries. The command lines share age's flags, so one driver serves
both `age` and `agefast`, and pyrage's API is agefast's, so one driver serves
both libraries.
"""

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyrage
import pytest

import agefast

CHUNK = 64 * 1024
SIZES = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 3 * CHUNK + 100, 5 * 1024 * 1024 + 7]
# scrypt costs about a second per side, so passphrase files get two cases.
PASSPHRASE_CASES = [(0, False), (CHUNK + 1, True)]
PASSPHRASE = "correct horse battery staple"
BINARY_START = b"age-encryption.org/v1\n"
ARMOR_START = b"-----BEGIN AGE ENCRYPTED FILE-----\n"


@dataclass
class Key:
    path: Path
    secret: str
    recipient: str


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    """An X25519 identity file as age-keygen writes it (tests/test_cli.py checks
    that Go age reads agefast-keygen's), made here so that the pyrage half of
    the grid runs where Go age is not installed."""
    identity = agefast.x25519.Identity.generate()
    path = tmp_path_factory.mktemp("interop-key") / "key.txt"
    path.write_text(f"# public key: {identity.to_public()}\n{identity}\n")
    return Key(path, str(identity), str(identity.to_public()))


class Library:
    """agefast or pyrage, which share one API."""

    def __init__(self, module):
        self.module = module

    def encrypt(self, plaintext, key, armored):
        recipient = self.module.x25519.Recipient.from_str(key.recipient)
        return self.module.encrypt(plaintext, [recipient], armored=armored)

    def decrypt(self, ciphertext, key):
        return self.module.decrypt(ciphertext, [self.module.x25519.Identity.from_str(key.secret)])

    def encrypt_passphrase(self, plaintext, armored):
        return self.module.passphrase.encrypt(plaintext, PASSPHRASE, armored=armored)

    def decrypt_passphrase(self, ciphertext):
        return self.module.passphrase.decrypt(ciphertext, PASSPHRASE)


class CommandLine:
    """`age` or `agefast`, which share age's flags.

    X25519 encryption reads an INPUT file and writes -o; decryption goes
    through stdin and stdout (age creates no -o file for an empty
    plaintext); passphrases are typed on a pseudo-terminal.
    """

    def __init__(self, argv, tmp_path, tty_run):
        self.argv = argv
        self.tmp = tmp_path
        self.tty_run = tty_run

    def _run(self, *args, data=b""):
        done = subprocess.run([*self.argv, *map(str, args)], input=data, capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout

    def encrypt(self, plaintext, key, armored):
        src, out = self.tmp / "in", self.tmp / "out.age"
        src.write_bytes(plaintext)
        self._run("-r", key.recipient, *(["-a"] if armored else []), "-o", out, src)
        return out.read_bytes()

    def decrypt(self, ciphertext, key):
        return self._run("-d", "-i", key.path, data=ciphertext)

    def _run_on_tty(self, args, replies, data):
        src, out = self.tmp / "in", self.tmp / "out"
        src.write_bytes(data)
        done = self.tty_run([*self.argv, *args, src], replies, stdout=out)
        assert done.returncode == 0, done.transcript.decode(errors="replace")
        return out.read_bytes()

    def encrypt_passphrase(self, plaintext, armored):
        replies = [(b"Enter passphrase", PASSPHRASE), (b"Confirm passphrase", PASSPHRASE)]
        return self._run_on_tty(["-p", *(["-a"] if armored else [])], replies, plaintext)

    def decrypt_passphrase(self, ciphertext):
        return self._run_on_tty(["-d"], [(b"Enter passphrase", PASSPHRASE)], ciphertext)


AGEFAST_CLI = [sys.executable, "-m", "agefast"]


@pytest.fixture(params=["api", "cli"])
def agefast_side(request, tmp_path, tty_run):
    if request.param == "api":
        return Library(agefast)
    return CommandLine(AGEFAST_CLI, tmp_path, tty_run)


@pytest.fixture(params=["age", "pyrage"])
def peer(request, tmp_path, tty_run, require_tool):
    if request.param == "pyrage":
        return Library(pyrage)
    require_tool("age")
    return CommandLine(["age"], tmp_path, tty_run)


@pytest.fixture(params=["agefast-to-peer", "peer-to-agefast"])
def sender_receiver(request, agefast_side, peer):
    """Who encrypts and who decrypts: each pairing runs in both directions."""
    return (agefast_side, peer) if request.param == "agefast-to-peer" else (peer, agefast_side)


def _check_format(ciphertext, armored):
    assert ciphertext.startswith(ARMOR_START if armored else BINARY_START)


@pytest.mark.parametrize("armored", [False, True], ids=["binary", "armored"])
@pytest.mark.parametrize("size", SIZES)
def test_x25519(sender_receiver, key, size, armored, make_plaintext):
    sender, receiver = sender_receiver
    plaintext = make_plaintext(size)
    ciphertext = sender.encrypt(plaintext, key, armored)
    _check_format(ciphertext, armored)
    assert receiver.decrypt(ciphertext, key) == plaintext


@pytest.mark.parametrize(("size", "armored"), PASSPHRASE_CASES)
def test_passphrase(sender_receiver, size, armored, make_plaintext):
    sender, receiver = sender_receiver
    plaintext = make_plaintext(size)
    ciphertext = sender.encrypt_passphrase(plaintext, armored)
    _check_format(ciphertext, armored)
    assert receiver.decrypt_passphrase(ciphertext) == plaintext


@pytest.mark.parametrize("size", [0, CHUNK, 3 * CHUNK + 100])
def test_post_quantum_api_round_trip(size, make_plaintext):
    """mlkem768x25519 (age1pq1...) round trip through the API.

    Only agefast itself is checked: Debian's age 1.1.1 predates the
    post-quantum type (age >= 1.3 has it) and pyrage has no such identity.
    """
    identity = agefast.pq.Identity.generate()
    recipient = agefast.pq.Recipient.from_str(str(identity.to_public()))
    plaintext = make_plaintext(size)
    ciphertext = agefast.encrypt(plaintext, [recipient])
    assert b"\n-> mlkem768x25519 " in ciphertext
    again = agefast.pq.Identity.from_str(str(identity))
    assert agefast.decrypt(ciphertext, [again]) == plaintext


@pytest.mark.parametrize("armored", [False, True], ids=["binary", "armored"])
def test_post_quantum_cli_round_trip(tmp_path, run_agefast, run_keygen, armored, make_plaintext):
    """mlkem768x25519 round trip through agefast-keygen -pq and the agefast CLI.

    Not checked against Go age: Debian's age 1.1.1 predates the type.
    """
    key = tmp_path / "pq.txt"
    assert run_keygen("-pq", "-o", key).returncode == 0
    recipients = tmp_path / "recipients.txt"
    assert run_keygen("-y", "-o", recipients, key).returncode == 0
    plaintext = make_plaintext(2 * CHUNK + 1)
    encrypted = run_agefast("-R", recipients, *(["-a"] if armored else []), input=plaintext)
    assert encrypted.returncode == 0, encrypted.stderr
    _check_format(encrypted.stdout, armored)
    decrypted = run_agefast("-d", "-i", key, input=encrypted.stdout)
    assert decrypted.returncode == 0, decrypted.stderr
    assert decrypted.stdout == plaintext
