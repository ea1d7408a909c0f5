"""The native X25519 recipient type (age-encryption.org/v1, "X25519").

This module is the public name of agefast.recipients.x25519 (pyrage's name),
where the design is described.
"""

from .recipients.x25519 import RECIPIENT_HRP, IDENTITY_HRP, STANZA_TYPE, Recipient, Identity

__all__ = ["RECIPIENT_HRP", "IDENTITY_HRP", "STANZA_TYPE", "Recipient", "Identity"]
