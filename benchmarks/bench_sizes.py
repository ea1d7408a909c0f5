"""Throughput against payload size (1 KiB .. 1 GiB) and threads.

For every size, interleaved round by round:
- agefast.encrypt/decrypt in memory with threads=1 and threads=2 (default
  engine choice: the Numba kernels from 1 MiB on), and forced onto
  cryptography (AGEFAST_ENGINE=cryptography, "agefast-crypto");
- pyrage.encrypt/decrypt in memory;
- cryptography: a bare STREAM loop, ChaCha20Poly1305.encrypt_into /
  decrypt_into chunk by chunk into a buffer allocated once, no header: the
  ceiling of any implementation built on cryptography;
- primitives: the bare loop after the header's primitives, called one
  after the other with nothing around them (an ephemeral X25519 share and
  exchange to encrypt through libsodium, as agefast makes them once a
  process has made enough, and one exchange to decrypt through OpenSSL with
  the identity's key kept, as agefast makes it; the three HKDFs,
  the header HMAC, the file key's wrap or unwrap): the floor of a whole
  call on these libraries;
- the agefast and Go age commands on page-cached files (Go age also with
  GOMAXPROCS=1), whose times include starting the process.

In-process cases at small sizes repeat the call so that one timed sample lasts
a few milliseconds; times are per call. All decryptions read the same age
file; encryptions are checked by decrypting with another implementation.

    python benchmarks/bench_sizes.py [--max MiB] [--sizes KiB,KiB,...] [--reps N] [--dir DIR]

--sizes measures only the sizes listed (each one of SIZES), e.g. --sizes 1,4,16,64.
"""

import os
import struct
import sys
from pathlib import Path

import agefast
import pyrage
from agefast.header import make_header  # to seal a real age file with the bare loop
from agefast.payload.rules import payload_key
from agefast.format import bech32
from agefast.primitives import hkdf, hmac_sha256
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from nacl.bindings import crypto_scalarmult, crypto_scalarmult_base

import common
from common import AGE, AGEFAST, MiB

CHUNK = 64 * 1024
TAG = 16
SIZES = [1024 * 4 ** i for i in range(11)]  # 1 KiB .. 1 GiB
SAMPLE_BYTES = 8 * MiB  # in-process calls repeat until a sample covers this much


def stream_seal(key: bytes, src: memoryview, dst: memoryview) -> int:
    """age's STREAM over `src` into `dst` with nothing but cryptography."""
    aead = ChaCha20Poly1305(key)
    nonce = bytearray(12)
    n = len(src)
    written = pos = counter = 0
    while True:
        end = min(pos + CHUNK, n)
        struct.pack_into(">QB", nonce, 3, counter, end == n)
        written += aead.encrypt_into(nonce, src[pos:end], None, dst[written:written + end - pos + TAG])
        counter += 1
        pos = end
        if pos == n:
            return written


def stream_open(key: bytes, src: memoryview, dst: memoryview) -> int:
    aead = ChaCha20Poly1305(key)
    nonce = bytearray(12)
    n = len(src)
    out = pos = counter = 0
    while pos < n:
        end = min(pos + CHUNK + TAG, n)
        struct.pack_into(">QB", nonce, 3, counter, end == n)
        out += aead.decrypt_into(nonce, src[pos:end], None, dst[out:out + end - pos - TAG])
        counter += 1
        pos = end
    return out


X25519_INFO = b"age-encryption.org/v1/X25519"
ZERO_NONCE = bytes(12)


def header_primitives(recipient: bytes, identity: X25519PrivateKey | None, header: bytes, file_key: bytes,
                      nonce: bytes, stanza_body: bytes = b"") -> bytes:
    """The primitives of a one-recipient X25519 header, to encrypt (identity
    None: a new key pair) or decrypt (the stanza's share is the recipient
    itself here, and `stanza_body` what an encryption returns): the floor of
    the header's cost."""
    if identity is None:
        scalar = os.urandom(32)
        share = crypto_scalarmult_base(scalar)
        secret = crypto_scalarmult(scalar, recipient)
        wrap_key = hkdf(secret, share + recipient, X25519_INFO)
        body = ChaCha20Poly1305(wrap_key).encrypt(ZERO_NONCE, file_key, None)
    else:
        secret = identity.exchange(X25519PublicKey.from_public_bytes(recipient))
        wrap_key = hkdf(secret, recipient + recipient, X25519_INFO)
        body = ChaCha20Poly1305(wrap_key).decrypt(ZERO_NONCE, stanza_body, None)
    hmac_sha256(hkdf(file_key, b"", b"header"), header)
    hkdf(file_key, nonce, b"payload")
    return body


def sealed_size(n: int) -> int:
    return n + max(1, -(-n // CHUNK)) * TAG


class Keys:
    def __init__(self, directory: Path):
        self.path, self.recipient_text = common.make_key(directory)
        text = self.path.read_text()
        self.identities = agefast.parse_identities(text)
        self.recipients = agefast.parse_recipients(self.recipient_text)
        secret = next(line for line in text.splitlines() if line.startswith("AGE-SECRET-KEY-"))
        self.py_identity = pyrage.x25519.Identity.from_str(secret)
        self.py_recipient = pyrage.x25519.Recipient.from_str(self.recipient_text)
        # The raw keys, for the primitives case.
        self.x25519_private = bech32.decode(secret)[1]
        self.x25519_public = crypto_scalarmult_base(self.x25519_private)
        self.x25519_key = X25519PrivateKey.from_private_bytes(self.x25519_private)


class AgeFile:
    """One age file of `data`, sealed by the bare loop and checked by pyrage:
    what every decryption reads. Keeps what the primitives case needs."""

    def __init__(self, keys: Keys, data: bytes):
        self.header, self.file_key = make_header(keys.recipients)
        self.nonce = os.urandom(16)
        self.key = payload_key(self.file_key, self.nonce)
        self.start = len(self.header) + 16
        sealed = bytearray(self.start + sealed_size(len(data)))
        sealed[:self.start] = self.header + self.nonce
        stream_seal(self.key, memoryview(data), memoryview(sealed)[self.start:])
        self.sealed = bytes(sealed)
        if pyrage.decrypt(self.sealed, [keys.py_identity]) != data:
            raise SystemExit("the bare STREAM loop does not make a valid age file")
        # The body of a stanza whose share is the recipient itself (header_primitives).
        recipient = keys.x25519_public
        secret = crypto_scalarmult(keys.x25519_private, recipient)
        self.stanza_body = ChaCha20Poly1305(hkdf(secret, recipient + recipient, X25519_INFO)).encrypt(
            ZERO_NONCE, self.file_key, None)

    def encrypt_primitives(self, keys: Keys) -> None:
        header_primitives(keys.x25519_public, None, self.header, self.file_key, self.nonce)

    def decrypt_primitives(self, keys: Keys) -> None:
        header_primitives(keys.x25519_public, keys.x25519_key, self.header, self.file_key, self.nonce,
                          self.stanza_body)


def one_size(size: int, reps: int, keys: Keys, directory: Path) -> dict:
    data = os.urandom(size)
    calls = max(1, SAMPLE_BYTES // size)
    age_file = AgeFile(keys, data)
    key, start, sealed = age_file.key, age_file.start, age_file.sealed
    plain_path, sealed_path, out_path = (directory / n for n in ("sweep", "sweep.age", "sweep.out"))
    plain_path.write_bytes(data)
    sealed_path.write_bytes(sealed)
    common.warm(plain_path, sealed_path)
    p, s, o, k, r = str(plain_path), str(sealed_path), str(out_path), str(keys.path), keys.recipient_text
    one_proc = {**os.environ, "GOMAXPROCS": "1"}
    default = common.engine_env(None)
    ceiling_out = memoryview(bytearray(sealed_size(size)))
    ceiling_plain = memoryview(bytearray(size))
    outputs = {}

    def repeat(name, fn):
        def timed():
            for _ in range(calls):
                outputs[name] = fn()
        return timed

    encrypt = {
        "agefast-t1": common.in_engine(None, repeat(
            "agefast-t1", lambda: agefast.encrypt(data, keys.recipients, threads=1))),
        "agefast-t2": common.in_engine(None, repeat(
            "agefast-t2", lambda: agefast.encrypt(data, keys.recipients, threads=2))),
        "agefast-crypto": common.in_engine("cryptography", repeat(
            "agefast-crypto", lambda: agefast.encrypt(data, keys.recipients))),
        "pyrage": repeat("pyrage", lambda: pyrage.encrypt(data, [keys.py_recipient])),
        "cryptography": repeat("cryptography", lambda: stream_seal(key, memoryview(data), ceiling_out)),
        "primitives": repeat("primitives", lambda: (
            age_file.encrypt_primitives(keys),
            stream_seal(key, memoryview(data), ceiling_out))[1]),
        "agefast-cli": lambda: common.run([AGEFAST, "-r", r, "-o", o, p], env=default),
        "age-cli": lambda: common.run([AGE, "-r", r, "-o", o, p]),
        "age-cli-p1": lambda: common.run([AGE, "-r", r, "-o", o, p], env=one_proc),
    }
    decrypt = {
        "agefast-t1": common.in_engine(None, repeat(
            "agefast-t1", lambda: agefast.decrypt(sealed, keys.identities, threads=1))),
        "agefast-t2": common.in_engine(None, repeat(
            "agefast-t2", lambda: agefast.decrypt(sealed, keys.identities, threads=2))),
        "agefast-crypto": common.in_engine("cryptography", repeat(
            "agefast-crypto", lambda: agefast.decrypt(sealed, keys.identities))),
        "pyrage": repeat("pyrage", lambda: pyrage.decrypt(sealed, [keys.py_identity])),
        "cryptography": repeat("cryptography", lambda: stream_open(key, memoryview(sealed)[start:], ceiling_plain)),
        "primitives": repeat("primitives", lambda: (
            age_file.decrypt_primitives(keys),
            stream_open(key, memoryview(sealed)[start:], ceiling_plain))[1]),
        "agefast-cli": lambda: common.run([AGEFAST, "-d", "-i", k, "-o", o, s], env=default),
        "age-cli": lambda: common.run([AGE, "-d", "-i", k, "-o", o, s]),
        "age-cli-p1": lambda: common.run([AGE, "-d", "-i", k, "-o", o, s], env=one_proc),
    }

    def produced(name, ceiling: memoryview) -> bytes:
        if name.endswith(("-cli", "-p1")):
            return out_path.read_bytes()
        result = outputs.pop(name)
        if name not in ("cryptography", "primitives"):
            return result
        written = bytes(ceiling[:result])
        ceiling[:] = bytes(len(ceiling))  # the next run must write every byte again
        return written

    def verify_encrypt(name):
        ciphertext = produced(name, ceiling_out)
        if name in ("cryptography", "primitives"):
            ok = ciphertext == sealed[start:]  # same key and nonce: the very same payload
        elif name.startswith("agefast"):
            ok = pyrage.decrypt(ciphertext, [keys.py_identity]) == data
        else:
            ok = agefast.decrypt(ciphertext, keys.identities) == data
        if not ok:
            raise SystemExit(f"encrypt {common.size_name(size)} with {name}: the output does not round-trip")

    def verify_decrypt(name):
        if produced(name, ceiling_plain) != data:
            raise SystemExit(f"decrypt {common.size_name(size)} with {name}: the output differs from the input")

    result = {"size": size, "calls_per_sample": calls}
    for op, cases, verify in (("encrypt", encrypt, verify_encrypt), ("decrypt", decrypt, verify_decrypt)):
        raw = common.interleave(cases, reps, prepare=lambda name: out_path.unlink(missing_ok=True),
                                verify=verify, log=False)
        for name, case in raw.items():
            if not name.endswith(("-cli", "-p1")):
                for run in case["runs"]:
                    for field in ("seconds", "cpu_seconds", "task-clock", "page-faults", "context-switches"):
                        if field in run:
                            run[field] /= calls
        result[op] = {name: {**common.summarize(c, size), **c} for name, c in raw.items()}
        print(common.size_name(size), op, {n: round(c["gb_per_s"], 3) for n, c in result[op].items()},
              file=sys.stderr, flush=True)
    for path in (plain_path, sealed_path, out_path):
        path.unlink(missing_ok=True)
    return result


def main() -> None:
    args = common.arguments(__doc__, 5, [("--max", 1024, "largest size in MiB")],
                            [("--sizes", "", "only these sizes, in KiB, comma-separated (default: all up to --max)")])
    sizes = [s for s in SIZES if s <= args.max * MiB]
    if args.sizes:
        sizes = [int(k) * 1024 for k in args.sizes.split(",")]
        if not set(sizes) <= set(SIZES):
            raise SystemExit(f"--sizes: each size must be one of {[s // 1024 for s in SIZES]} KiB")
    keys = Keys(args.dir)
    common.warm_engine()
    result = {"dir": str(args.dir), "filesystem": common.filesystem(args.dir), "sizes": []}
    for size in sizes:
        result["sizes"].append(one_size(size, args.reps, keys, args.dir))
        # Saved after every size, so a long sweep that is cut short still counts.
        common.save("sizes", result)


if __name__ == "__main__":
    main()
