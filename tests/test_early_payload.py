"""A large file's payload sealed before its header (agefast.cli.early_payload), in the library and in the command."""

import hmac
import os
import subprocess
import sys

import command_imports
import pytest

import agefast
from agefast.cli import early_payload, key_flags
from agefast.payload import rules
from agefast.payload.engine import ENGINE_AFTER
from agefast.format import bech32
from agefast import header, kernels, primitives
from agefast.errors import EncryptError

MiB = 1 << 20
BATCH = kernels.FILE_BATCH * kernels.CHUNK_SIZE
IDENTITIES = [agefast.x25519.Identity.generate() for _ in range(3)]
RECIPIENTS = [i.to_public() for i in IDENTITIES]


@pytest.fixture(scope="module", autouse=True)
def warm_cache():
    # The file kernel applies only where the kernels are in the cache (agefast.payload.engine.choose),
    # for this process and the commands it starts: fill it here if it is cold.
    kernels.warm_up()


def test_the_payload_key_is_hkdf_sha256_of_the_file_key():
    # The command derives it before cryptography is imported, with the standard library's HMAC; it must be age's HKDF.
    file_key, nonce = os.urandom(16), os.urandom(16)
    expected = primitives.hkdf(file_key, nonce, b"payload")
    assert rules.payload_key(file_key, nonce, lambda key, data: hmac.digest(key, data, "sha256")) == expected
    assert rules.payload_key(file_key, nonce) == expected


@pytest.mark.parametrize("count", [1, 2, 3])
def test_the_header_size_is_that_of_a_header_for_as_many_x25519_keys(count):
    made, _ = header.make_header(RECIPIENTS[:count])
    assert early_payload.header_size(count) == len(made)


def test_is_x25519_takes_what_parse_recipient_reads_as_x25519():
    key = str(RECIPIENTS[0])
    assert key_flags.is_x25519(key)
    others = [str(agefast.pq.Identity.generate().to_public()),               # age1pq1...
              bech32.encode("age1tag", bytes(33)), bech32.encode("age1agefasttest", b"data"),   # tag, a plugin's
              "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHsKLqeplhpW+uObz5dvMgjz1OxfM/XXUB/VsRNCGoQj",
              key[:-1] + ("p" if key.endswith("q") else "q"),                 # a bad checksum
              bech32.encode("age", bytes(31)), key.upper()]
    for text in others:
        assert not key_flags.is_x25519(text), text
        try:
            parsed = agefast.parse_recipients(text)
        except agefast.RecipientError:
            continue
        assert not isinstance(parsed[0], agefast.x25519.Recipient), text


def seal(tmp_path, plain: bytes, recipients, threads=None, meanwhile=None) -> bytes:
    """The file sealed early; `meanwhile()` runs as the keys are loaded, while the file kernel seals."""
    (tmp_path / "in").write_bytes(plain)

    def load():
        if meanwhile is not None:
            meanwhile()
        return recipients

    with open(tmp_path / "in", "rb") as src, open(tmp_path / "out", "w+b") as dst:
        assert early_payload.sealed_early(src, dst, len(recipients), threads, load)
    return (tmp_path / "out").read_bytes()


def not_loaded():
    raise AssertionError("the keys were loaded")


# Sizes: the smallest that applies, a whole number of batches (the pipeline's
# tail is then a whole batch), a batch and a chunk over, and a short last chunk.
@pytest.mark.parametrize("size,threads", [(ENGINE_AFTER, None), (20 * BATCH, 1),
                                          (17 * BATCH + kernels.CHUNK_SIZE, 2), (21 * BATCH + 1000, 3)])
def test_files_decrypt_with_every_identity(tmp_path, make_plaintext, size, threads):
    plain = make_plaintext(size)
    sealed = seal(tmp_path, plain, RECIPIENTS, threads)
    for identity in IDENTITIES:
        assert agefast.decrypt(sealed, [identity]) == plain
    assert len(sealed) == early_payload.header_size(3) + 16 + size + 16 * -(-size // kernels.CHUNK_SIZE)


def test_an_input_that_grew_is_sealed_whole(tmp_path, make_plaintext):
    plain = make_plaintext(40 * MiB)
    more = make_plaintext(3 * MiB + 5, seed=1)

    def grow():
        with open(tmp_path / "in", "ab") as f:
            f.write(more)

    sealed = seal(tmp_path, plain, RECIPIENTS[:1], meanwhile=grow)
    assert agefast.decrypt(sealed, IDENTITIES[:1]) == plain + more


def test_an_input_that_shrank_under_the_workers_fails(tmp_path, monkeypatch):
    real = kernels.FileJob.wait

    def shrank(self):
        real(self)
        raise EOFError("the input ended before its last batch")

    monkeypatch.setattr(kernels.FileJob, "wait", shrank)
    with pytest.raises(EncryptError, match="shrank"):
        seal(tmp_path, bytes(33 * MiB), RECIPIENTS[:1])


def test_a_header_of_another_size_is_refused(tmp_path):
    # placed for one X25519 stanza, handed a passphrase's scrypt stanza
    with pytest.raises(EncryptError, match="bytes, not the"):
        seal(tmp_path, bytes(33 * MiB), [agefast.passphrase.Recipient("a passphrase")])


@pytest.mark.parametrize("size,output", [(ENGINE_AFTER - 1, b""), (ENGINE_AFTER, b"x")])
def test_it_does_not_apply_to_a_small_input_or_an_output_with_data(tmp_path, size, output):
    (tmp_path / "in").write_bytes(bytes(size))
    (tmp_path / "out").write_bytes(output)
    with open(tmp_path / "in", "rb") as src, open(tmp_path / "out", "r+b") as dst:
        assert not early_payload.sealed_early(src, dst, 1, None, not_loaded)
    assert (tmp_path / "out").read_bytes() == output


def test_it_does_not_apply_where_the_file_stays_on_cryptography(tmp_path, engine_setting):
    engine_setting("cryptography")
    (tmp_path / "in").write_bytes(bytes(ENGINE_AFTER))
    with open(tmp_path / "in", "rb") as src, open(tmp_path / "out", "wb") as dst:
        assert not early_payload.sealed_early(src, dst, 1, None, not_loaded)
    assert (tmp_path / "out").read_bytes() == b""


def test_it_does_not_apply_to_a_pipe(tmp_path):
    read, write = os.pipe()
    os.close(write)
    with open(read, "rb") as src, open(tmp_path / "out", "wb") as dst:
        assert not early_payload.sealed_early(src, dst, 1, None, not_loaded)


def run_command(args, **kw):
    return subprocess.run([sys.executable, "-m", "agefast", *map(str, args)], capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=300, **kw)


def test_the_command_seals_a_large_file_before_it_imports_cryptography(tmp_path, make_plaintext):
    plain = make_plaintext(40 * MiB)
    (tmp_path / "in").write_bytes(plain)
    # What the command imported, in order: the file kernel came before cryptography.
    probe = command_imports.probe("print(imported.index('agefast.cli.early_payload') < imported.index('agefast.kernels')"
                                  " < imported.index('cryptography'), file=sys.stderr)")
    args = ["-r", RECIPIENTS[0], "-r", RECIPIENTS[1], "-o", tmp_path / "out", tmp_path / "in"]
    done = subprocess.run([sys.executable, "-c", probe, *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "True\n", done.stderr
    sealed = (tmp_path / "out").read_bytes()
    assert agefast.decrypt(sealed, IDENTITIES[1:2]) == plain
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out"]


@pytest.mark.requires_tool("age")
def test_go_age_decrypts_what_the_command_sealed_early(tmp_path, make_plaintext, age_key):
    key, recipient = age_key
    plain = make_plaintext(34 * MiB + 3)
    (tmp_path / "in").write_bytes(plain)
    done = run_command(["--threads", "2", "-r", recipient, "-o", tmp_path / "out", tmp_path / "in"])
    assert done.returncode == 0, done.stderr
    opened = subprocess.run(["age", "-d", "-i", key, tmp_path / "out"], capture_output=True, timeout=300)
    assert opened.returncode == 0 and opened.stdout == plain


def test_a_failure_after_the_start_leaves_no_output_and_says_what_age_says(tmp_path):
    # A low-order point is a valid X25519 recipient string whose wrapping
    # fails: the command has started the payload by then.
    zero = bech32.encode("age", bytes(32))
    (tmp_path / "big").write_bytes(bytes(40 * MiB))
    (tmp_path / "small").write_bytes(bytes(10))
    early = run_command(["-r", zero, "-o", tmp_path / "big.age", tmp_path / "big"])
    late = run_command(["-r", zero, "-o", tmp_path / "small.age", tmp_path / "small"])
    assert early.returncode == late.returncode == 1
    assert early.stderr == late.stderr and early.stderr.startswith(b"agefast: error: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big", "small"]
