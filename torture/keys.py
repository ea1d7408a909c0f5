"""Key material, ordinary and degraded, described independently of any
implementation: an adapter turns a KeySpec into its own identity and
recipient objects."""

import random
from dataclasses import dataclass

from . import bech32
from .primitives import FILE_KEY_SIZE, x25519_public


@dataclass(frozen=True)
class KeySpec:
    """One key: kind "x25519" (secret = 32-byte scalar), "passphrase"
    (secret = the passphrase, work_factor used to encrypt) or "pq"."""

    kind: str
    secret: bytes | str = b""
    work_factor: int = 10

    @property
    def public(self) -> bytes:
        return x25519_public(self.secret)

    def age_identity(self) -> str:
        return bech32.encode("AGE-SECRET-KEY-", self.secret)


def x25519(rng: random.Random) -> KeySpec:
    return KeySpec("x25519", rng.randbytes(32))


def _patterns(size: int) -> dict[str, bytes]:
    """All-0x00, all-0xFF, bit ramps and single set bits of `size` bytes."""
    out = {
        "zeros": bytes(size),
        "ones": b"\xff" * size,
        "ramp-up": bytes(range(size)),
        "ramp-down": bytes(255 - i for i in range(size)),
        "alternating": b"\xaa\x55" * (size // 2),
    }
    for bit in (0, 1, 7, 8, size * 4, size * 8 - 2, size * 8 - 1):
        v = bytearray(size)
        v[bit // 8] = 1 << (bit % 8)
        out[f"bit-{bit}"] = bytes(v)
    return out


DEGRADED_FILE_KEYS = _patterns(FILE_KEY_SIZE)
DEGRADED_SCALARS = _patterns(32)

# The points of small order on Curve25519 and their non-canonical encodings
# (the list libsodium refuses). X25519 with any of them gives an all-zero
# shared secret, which age must refuse.
_LOW_ORDER = [
    bytes(32),
    b"\x01" + bytes(31),
    bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
    bytes.fromhex("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
    b"\xec" + b"\xff" * 30 + b"\x7f",
    b"\xed" + b"\xff" * 30 + b"\x7f",
    b"\xee" + b"\xff" * 30 + b"\x7f",
]
LOW_ORDER_POINTS = _LOW_ORDER + [p[:31] + bytes([p[31] | 0x80]) for p in _LOW_ORDER]

PASSPHRASES = {
    "empty": "",
    "long": "correct horse battery staple " * 2000,
    "non-ascii": "pässwörd 🔑 日本語 \u0645\u0631\u062d\u0628\u0627",
    "combining": "e\u0301\u0301\u0301",
    "nul": "a\0b",
}


def passphrase(name: str, work_factor: int) -> KeySpec:
    return KeySpec("passphrase", PASSPHRASES[name], work_factor)
