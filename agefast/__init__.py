"""agefast: the age file-encryption format (age-encryption.org/v1).

A superset of pyrage's API, so `import agefast as pyrage` works, plus true
streaming through `encryptor` and `decryptor`.
"""

from . import passphrase, plugin, pq, ssh, tag, tagpq, x25519
from .api import (
    Decryptor,
    Encryptor,
    decrypt,
    decrypt_file,
    decrypt_io,
    decryptor,
    encrypt,
    encrypt_file,
    encrypt_io,
    encryptor,
)
from .errors import DecryptError, EncryptError, IdentityError, RecipientError
from .keys import load_identities, parse_identities, parse_recipients

__all__ = [
    "Decryptor",
    "DecryptError",
    "EncryptError",
    "Encryptor",
    "IdentityError",
    "RecipientError",
    "decrypt",
    "decrypt_file",
    "decrypt_io",
    "decryptor",
    "encrypt",
    "encrypt_file",
    "encrypt_io",
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
