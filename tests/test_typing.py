"""The public signatures, pinned: mypy --strict checks a file of assert_type
calls against agefast's annotations (agefast ships py.typed)."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from required import need_module

need_module("mypy")

ROOT = Path(__file__).resolve().parent.parent

SIGNATURES = """\
import io
from pathlib import Path
from typing import assert_type

import agefast
from agefast import passphrase, plugin, pq, ssh, tag, tagpq, x25519
from agefast.format.grammar import Stanza

identity = x25519.Identity.generate()
assert_type(identity, x25519.Identity)
recipient = identity.to_public()
assert_type(recipient, x25519.Recipient)
assert_type(x25519.Recipient.from_str(str(recipient)), x25519.Recipient)
assert_type(x25519.Identity.from_str(str(identity)), x25519.Identity)
assert_type(recipient.wrap(bytes(16)), list[Stanza])
assert_type(identity.unwrap([]), bytes | None)

assert_type(agefast.encrypt(b"", [recipient]), bytes)
assert_type(agefast.encrypt(bytearray(), [recipient], True, threads=2), bytes)
assert_type(agefast.decrypt(memoryview(b""), [identity], armored=None), bytes)
buf = bytearray(1 << 10)
assert_type(agefast.encrypt_into(b"", [recipient], buf), int)
assert_type(agefast.decrypt_into(b"", [identity], buf), int)
assert_type(agefast.encrypt_io(io.BytesIO(), io.BytesIO(), [recipient]), None)
assert_type(agefast.decrypt_io(io.BytesIO(), io.BytesIO(), [identity]), None)
assert_type(agefast.encrypt_file("in", "out", [recipient], direct=True), None)
assert_type(agefast.decrypt_file(b"in", Path("out"), [identity]), None)
assert_type(agefast.rekey(Path("in"), "in", [identity], [recipient]), None)
assert_type(agefast.rekey_io(io.BytesIO(), io.BytesIO(), [identity], [recipient]), None)

encryptor = agefast.encryptor(io.BytesIO(), [recipient], armored=True)
assert_type(encryptor, agefast.Encryptor)
assert_type(encryptor.write(b""), int)
assert_type(encryptor.close(), None)
decryptor = agefast.decryptor(io.BytesIO(), [identity])
assert_type(decryptor, agefast.Decryptor)
assert_type(decryptor.readall(), bytes)
assert_type(decryptor.readinto(buf), int)
assert_type(decryptor.seek(0), int)
assert_type(decryptor.tell(), int)
assert_type(decryptor.pread(0, 10), bytes)
reader = agefast.encrypting_reader(io.BytesIO(), [recipient])
assert_type(reader, agefast.EncryptingReader)
assert_type(reader.readall(), bytes)

# Every recipient and identity type is accepted where the API takes one.
pq_identity = pq.Identity.generate()
assert_type(pq_identity, pq.Identity)
assert_type(pq_identity.to_public(), pq.Recipient)
assert_type(tag.Recipient.from_str("age1tag1"), tag.Recipient)
assert_type(tagpq.Recipient.from_str("age1tagpq1"), tagpq.Recipient)
assert_type(ssh.Recipient.from_str("ssh-ed25519 AAAA"), ssh.Recipient)
assert_type(ssh.Identity.from_buffer(b"", "secret").to_public(), ssh.Recipient)
words = passphrase.Recipient("words")
assert_type(plugin.Recipient.from_str("age1x1").plugin(), str)
agefast.encrypt(b"", [recipient, pq_identity.to_public(), words, tag.Recipient.from_str("")])
agefast.decrypt(b"", [identity, pq_identity, passphrase.Identity("words"),
                     plugin.IdentityPluginV1("x", [plugin.Identity.from_str("")], None)])
assert_type(passphrase.encrypt(b"", "words"), bytes)
assert_type(passphrase.decrypt(b"", "words"), bytes)

# What the parsers return can be given back to encrypt and decrypt.
agefast.encrypt(b"", agefast.parse_recipients(""))
agefast.decrypt(b"", agefast.parse_identities(""))
agefast.decrypt(b"", agefast.load_identities(b"", passphrase=lambda prompt: "words"))
"""


def _mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    """mypy --strict on `source` as a file of its own, against this checkout's agefast."""
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent(source))
    # The snippet is checked as a user's code would be: agefast's own code
    # is not reported on (the project's mypy run checks it), only its types used.
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n[mypy-agefast.*]\nfollow_imports = silent\n")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", str(config),
         "--python-version", "3.11", str(snippet)],
        cwd=tmp_path, env={**os.environ, "MYPYPATH": str(ROOT)}, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    return _mypy(tmp_path_factory.mktemp("typing"), SIGNATURES)


def test_public_signatures_pass_strict_mypy(checked: subprocess.CompletedProcess[str]) -> None:
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_encrypt_reveals_bytes(tmp_path: Path) -> None:
    result = _mypy(tmp_path, """\
        import agefast
        reveal_type(agefast.encrypt(b"", []))
    """)
    # mypy before 1.16 spells it "builtins.bytes", later ones "bytes".
    assert re.search(r'Revealed type is "(builtins\.)?bytes"', result.stdout), result.stdout + result.stderr


@pytest.mark.parametrize("wrong", [
    "assert_type(agefast.encrypt(b'', []), str)",
    "assert_type(agefast.encrypt_into(b'', [], bytearray()), bytes)",
    "assert_type(agefast.x25519.Identity.generate(), agefast.x25519.Recipient)",
    "agefast.encrypt('a str', [])",
    "agefast.encrypt(b'', [object()])",
    "agefast.decrypt(b'', [agefast.x25519.Identity.generate().to_public()])",
    "agefast.decryptor(io.StringIO(), [])",
])
def test_a_wrong_signature_fails(tmp_path: Path, wrong: str) -> None:
    """The check can fail: a signature that regressed to these would be caught."""
    result = _mypy(tmp_path, f"import io\nfrom typing import assert_type\nimport agefast\n{wrong}\n")
    # The error is the wrong line's (line 4), not some other mistake.
    assert result.returncode == 1 and "snippet.py:4: error:" in result.stdout, result.stdout + result.stderr
