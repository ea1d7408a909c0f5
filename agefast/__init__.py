"""agefast: the age file-encryption format (age-encryption.org/v1).

A superset of pyrage's API, so `import agefast as pyrage` works, plus true
streaming through `encryptor` and `decryptor`, and `encrypting_reader`
for code that reads (uploaders).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Type checkers see the lazily imported names as what they are.
    from . import errors, passphrase, plugin, pq, ssh, tag, tagpq, tree, x25519
    from .api import decrypt, decrypt_file, decrypt_into, decrypt_io, encrypt, encrypt_file, encrypt_into, encrypt_io
    from .streaming import Decryptor, Encryptor, decryptor, encryptor
    from .encrypt_reader import EncryptingReader, encrypting_reader
    from .errors import DecryptError, EncryptError, IdentityError, RecipientError
    from .keys import load_identities, parse_identities, parse_recipients
    from .rekeying import rekey, rekey_io

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
    "rekey",
    "rekey_io",
    "ssh",
    "tag",
    "tagpq",
    "tree",
    "x25519",
]

# Everything is imported on first use (agefast.encrypt, `from agefast import
# ssh`): the recipient types together cost a process ~25 ms, and
# cryptography, which all but the errors need, ~25 ms more; the command
# starts sealing a large file before it needs cryptography
# (agefast.cli.early_payload), and most files need no recipient type but X25519.
_MODULES = frozenset({"errors", "passphrase", "plugin", "pq", "ssh", "tag", "tagpq", "tree", "x25519"})
_HOMES = {
    **dict.fromkeys(("decrypt", "decrypt_file", "decrypt_into", "decrypt_io", "encrypt", "encrypt_file", "encrypt_into",
                     "encrypt_io"), "api"),
    **dict.fromkeys(("Decryptor", "Encryptor", "decryptor", "encryptor"), "streaming"),
    # (not a module named encrypting_reader: importing it would make the package's attribute of that name
    # the module, over the function)
    **dict.fromkeys(("EncryptingReader", "encrypting_reader"), "encrypt_reader"),
    **dict.fromkeys(("DecryptError", "EncryptError", "IdentityError", "RecipientError"), "errors"),
    **dict.fromkeys(("load_identities", "parse_identities", "parse_recipients"), "keys"),
    **dict.fromkeys(("rekey", "rekey_io"), "rekeying"),
}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f".{name}", __name__)
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value     # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
