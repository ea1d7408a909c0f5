"""A module with pyrage's API that decrypts X25519 binary files only: it has
no passphrase module and refuses armor, so agetorture must find both out and
report those cases as not run (module:x25519_only_age)."""

import pyrage
from pyrage import x25519  # noqa: F401  (part of the API agetorture looks for)


def decrypt(data: bytes, identities) -> bytes:
    if data.startswith(b"-----BEGIN"):
        raise ValueError("armor is not supported")
    return pyrage.decrypt(data, identities)
