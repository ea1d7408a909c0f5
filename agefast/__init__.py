"""agefast: the age file-encryption format (age-encryption.org/v1).

A superset of pyrage's API, so `import agefast as pyrage` works, plus true
streaming through `encryptor` and `decryptor`, and `encrypting_reader`
for code that reads (uploaders).
"""

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from . import x25519
from .api import (
    Decryptor,
    Encryptor,
    decrypt,
    decrypt_file,
    decrypt_into,
    decrypt_io,
    decryptor,
    encrypt,
    encrypt_file,
    encrypt_into,
    encrypt_io,
    encryptor,
)
from .encrypting_reader import EncryptingReader, encrypting_reader
from .errors import DecryptError, EncryptError, IdentityError, RecipientError
from .keys import load_identities, parse_identities, parse_recipients

if TYPE_CHECKING:
    # Type checkers see the lazily imported modules as the modules they are.
    from . import passphrase, plugin, pq, ssh, tag, tagpq

__all__ = [
    "Decryptor",
    "DecryptError",
    "EncryptError",
    "EncryptingReader",
    "Encryptor",
    "IdentityError",
    "RecipientError",
    "decrypt",
    "decrypt_file",
    "decrypt_into",
    "decrypt_io",
    "decryptor",
    "encrypt",
    "encrypt_file",
    "encrypt_into",
    "encrypt_io",
    "encrypting_reader",
    "encryptor",
    "load_identities",
    "parse_identities",
    "parse_recipients",
    "passphrase",
    "plugin",
    "pq",
    "ssh",
    "tag",
    "tagpq",
    "x25519",
]

# The other recipient types are imported on first use (agefast.ssh, or
# `from agefast import ssh`): together they cost every command ~25 ms of
# start-up, and most files only need X25519.
_LAZY = frozenset({"passphrase", "plugin", "pq", "ssh", "tag", "tagpq"})


def __getattr__(name: str) -> ModuleType:
    if name in _LAZY:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)
