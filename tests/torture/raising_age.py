"""A module with pyrage's API whose decrypt has a bug of its own on every file it cannot decrypt: it raises
IndexError, as code indexing a list it assumed full would. agetorture must report that as a crash, not as a
refusal (module:raising_age)."""

import pyrage
from pyrage import x25519  # noqa: F401  (part of the API agetorture looks for)


def decrypt(data: bytes, identities) -> bytes:
    try:
        return pyrage.decrypt(data, identities)
    except Exception:
        return [][0]
