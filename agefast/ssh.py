"""The ssh-ed25519 and ssh-rsa recipient types: age to existing SSH keys.

This module is the public name of agefast.recipients.ssh (pyrage's name),
where the design is described.
"""

from .errors import PassphraseNeededError, UnsupportedKeyError
from .recipients.ssh import (ED25519_TYPE, RSA_TYPE, MIN_RSA_BITS, MAX_RSA_BITS, key_type, Recipient, Identity,
                             openssh_public_key, EncryptedIdentity)

__all__ = ["PassphraseNeededError", "UnsupportedKeyError", "ED25519_TYPE", "RSA_TYPE", "MIN_RSA_BITS",
           "MAX_RSA_BITS", "key_type", "Recipient", "Identity", "openssh_public_key", "EncryptedIdentity"]
