"""A small age file maker that controls everything agefast would choose:
file key, payload nonce, ephemeral scalar and each chunk's final flag.

Tamper cases need it to forge chunks "with the real payload key", and the
degraded-key axis to pick file keys and scalars no honest encryptor would.
"""

from dataclasses import dataclass, field

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from .primitives import (CHUNK_SIZE, NONCE_SIZE, SCRYPT_LABEL, SEALED_CHUNK_SIZE, TAG_SIZE, b64, chunk_nonce,
                         header_mac, payload_key, seal, x25519_public, x25519_shared, x25519_wrap_key)

VERSION_LINE = b"age-encryption.org/v1\n"


def x25519_stanza(file_key: bytes, recipient: bytes, ephemeral: bytes) -> bytes:
    """The X25519 stanza wrapping `file_key` for public key `recipient`."""
    share = x25519_public(ephemeral)
    shared = x25519_shared(ephemeral, recipient)
    if shared is None:
        raise ValueError("cannot wrap to a low-order recipient")
    body = seal(x25519_wrap_key(shared, share, recipient), file_key)
    return b"-> X25519 " + b64(share) + b"\n" + b64(body) + b"\n"


def header(stanzas: list[bytes], file_key: bytes) -> bytes:
    """Version line, the given encoded stanzas, and a correct MAC line."""
    mac_input = VERSION_LINE + b"".join(stanzas) + b"---"
    return mac_input + b" " + b64(header_mac(file_key, mac_input)) + b"\n"


def split_chunks(plaintext: bytes) -> list[bytes]:
    """Plaintext per chunk; an empty payload is one empty final chunk."""
    return [plaintext[i:i + CHUNK_SIZE] for i in range(0, len(plaintext), CHUNK_SIZE)] or [b""]


def seal_chunk(key: bytes, index: int, plaintext: bytes, final: bool) -> bytes:
    return ChaCha20Poly1305(key).encrypt(chunk_nonce(index, final), plaintext, None)


@dataclass
class Forged:
    """A forged file and where its parts lie."""

    header: bytes
    nonce: bytes
    file_key: bytes
    chunks: list[bytes]  # plaintext of each chunk
    sealed: list[bytes] = field(default_factory=list)

    @property
    def key(self) -> bytes:
        return payload_key(self.file_key, self.nonce)

    @property
    def data(self) -> bytes:
        return self.header + self.nonce + b"".join(self.sealed)

    @property
    def payload_start(self) -> int:
        return len(self.header) + len(self.nonce)

    def chunk_span(self, i: int) -> tuple[int, int]:
        start = self.payload_start + i * SEALED_CHUNK_SIZE
        return start, start + len(self.sealed[i])

    def regions(self) -> dict[str, tuple[int, int]]:
        """Byte ranges of every part of the file, by name."""
        out = {}
        pos = 0
        for n, line in enumerate(self.header.splitlines(keepends=True)):
            if n == 0:
                name = "version"
            elif line.startswith(b"---"):
                name = "mac"
            elif line.startswith(b"-> "):
                name = f"stanza-{n}-args"
            else:
                name = f"stanza-{n}-body"
            out[name] = (pos, pos + len(line))
            pos += len(line)
        out["nonce"] = (pos, pos + len(self.nonce))
        for i in range(len(self.sealed)):
            start, end = self.chunk_span(i)
            if end - TAG_SIZE > start:
                out[f"chunk-{i}-body"] = (start, end - TAG_SIZE)
            out[f"chunk-{i}-tag"] = (end - TAG_SIZE, end)
        return out


def forge(plaintext: bytes, file_key: bytes, nonce: bytes, stanzas: list[bytes]) -> Forged:
    """An honest file: chunks sealed in order, the last one final."""
    f = Forged(header(stanzas, file_key), nonce, file_key, split_chunks(plaintext))
    key = f.key
    last = len(f.chunks) - 1
    f.sealed = [seal_chunk(key, i, c, i == last) for i, c in enumerate(f.chunks)]
    return f


def forge_x25519(plaintext: bytes, recipient: bytes, file_key: bytes, nonce: bytes, ephemeral: bytes) -> Forged:
    """An honest file to one X25519 recipient, with every secret chosen."""
    return forge(plaintext, file_key, nonce, [x25519_stanza(file_key, recipient, ephemeral)])


def scrypt_stanza(file_key: bytes, passphrase: str, work_factor: int, salt: bytes) -> bytes:
    """The scrypt stanza wrapping `file_key` under `passphrase`."""
    key = Scrypt(SCRYPT_LABEL + salt, 32, 1 << work_factor, 8, 1).derive(passphrase.encode())
    return b"-> scrypt " + b64(salt) + b" %d\n" % work_factor + b64(seal(key, file_key)) + b"\n"


def forge_scrypt(plaintext: bytes, passphrase: str, work_factor: int, rng) -> Forged:
    """An honest passphrase-encrypted file, its secrets drawn from `rng`."""
    file_key = rng.randbytes(16)
    stanza = scrypt_stanza(file_key, passphrase, work_factor, rng.randbytes(16))
    return forge(plaintext, file_key, rng.randbytes(NONCE_SIZE), [stanza])
