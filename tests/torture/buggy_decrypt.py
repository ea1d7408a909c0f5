"""A command-line age decryptor on agefast's streaming decryptor, with one bug
injected, for agetorture's command-line targets to catch.

    python buggy_decrypt.py BUG IDENTITY_FILE < file.age > plaintext

BUG is one of:
  none                  correct: plaintext on stdout, exit 1 with the error on stderr
  exit-zero             exits 0 whatever happened
  drop-last-byte        writes all of a good file's plaintext but its last byte
  release-failed-chunk  after a payload failure, also writes the plaintext of
                        the chunk whose tag failed (decrypted with the bare
                        ChaCha20 keystream, as a decryptor that checks tags
                        after writing would)
  panic                 on a failure, dies as a Go program panics (a stack
                        trace on stderr, exit 2)
  stop-at-256-chunks    writes 256 chunks and exits 0, as a decryptor whose
                        one-byte chunk counter wrapped might
"""

import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

import agefast
from agefast.errors import DecryptError, PayloadError
from torture import bech32, keys, reference
from torture.primitives import CHUNK_SIZE, SEALED_CHUNK_SIZE, TAG_SIZE, chunk_nonce

BUGS = ("none", "exit-zero", "drop-last-byte", "release-failed-chunk", "panic", "stop-at-256-chunks")


class Pipe:
    """The ciphertext as a source that cannot seek, so agefast streams it."""

    def __init__(self, data: bytes):
        self._data, self._pos = data, 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._data) if n is None or n < 0 else self._pos + n
        piece = self._data[self._pos:end]
        self._pos += len(piece)
        return piece


def failed_chunk_plaintext(data: bytes, keyfile: str) -> bytes:
    """The keystream decryption of the first chunk that does not verify."""
    specs = [keys.KeySpec("x25519", bech32.decode(line.strip())[1]) for line in open(keyfile)
             if line.startswith("AGE-SECRET-KEY-1")]
    key, payload = reference.open_header(data, specs)
    index = len(reference.open_file(data, specs).plaintext) // CHUNK_SIZE
    sealed = payload[index * SEALED_CHUNK_SIZE:(index + 1) * SEALED_CHUNK_SIZE]
    final = (index + 1) * SEALED_CHUNK_SIZE >= len(payload)
    block_one = (1).to_bytes(4, "little")  # block 0 keys Poly1305; the data starts at block 1
    stream = Cipher(algorithms.ChaCha20(key, block_one + chunk_nonce(index, final)), None).decryptor()
    return stream.update(sealed[:max(0, len(sealed) - TAG_SIZE)])


def main(bug: str, keyfile: str) -> int:
    data = sys.stdin.buffer.read()
    out = sys.stdout.buffer
    with open(keyfile) as f:
        identities = agefast.parse_identities(f.read())
    plaintext = bytearray()
    try:
        reader = agefast.decryptor(Pipe(data), identities)
        while piece := reader.read(CHUNK_SIZE):
            plaintext += piece
            if bug != "drop-last-byte":
                out.write(piece)
                out.flush()
            if bug == "stop-at-256-chunks" and len(plaintext) >= 256 * CHUNK_SIZE:
                return 0
    except DecryptError as e:
        if bug == "release-failed-chunk" and isinstance(e, PayloadError):
            out.write(failed_chunk_plaintext(data, keyfile))
        if bug == "panic":
            print(f"panic: runtime error: {e}\n\ngoroutine 1 [running]:\nmain.main()", file=sys.stderr)
            return 2
        print(f"buggy_decrypt: {type(e).__name__}: {e}", file=sys.stderr)
        return 0 if bug == "exit-zero" else 1
    if bug == "drop-last-byte":
        out.write(plaintext[:-1])
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in BUGS:
        sys.exit(f"usage: buggy_decrypt.py {{{','.join(BUGS)}}} IDENTITY_FILE < file.age")
    sys.exit(main(sys.argv[1], sys.argv[2]))
