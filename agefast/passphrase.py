"""The native scrypt recipient type: passphrase encryption.

This module is the public name of agefast.recipients.scrypt (pyrage's name),
where the design is described.
"""

from ._typing import Buffer
from .recipients.scrypt import STANZA_TYPE, DEFAULT_WORK_FACTOR, DEFAULT_MAX_WORK_FACTOR, Recipient, Identity

__all__ = ["STANZA_TYPE", "DEFAULT_WORK_FACTOR", "DEFAULT_MAX_WORK_FACTOR", "Recipient", "Identity", "encrypt",
           "decrypt"]


def encrypt(plaintext: Buffer, passphrase: str, armored: bool = False) -> bytes:
    """pyrage's passphrase.encrypt."""
    from .api import encrypt as _encrypt

    return _encrypt(plaintext, [Recipient(passphrase)], armored=armored)


def decrypt(ciphertext: Buffer, passphrase: str) -> bytes:
    """pyrage's passphrase.decrypt."""
    from .api import decrypt as _decrypt

    return _decrypt(ciphertext, [Identity(passphrase)])
