"""The mlkem768p256tag recipient type (age v1.3): the post-quantum tagged recipient.

This module is the public name of agefast.recipients.tagpq (pyrage's name),
where the design is described.
"""

from .recipients.tagpq import (RECIPIENT_HRP, STANZA_TYPE, MLKEM_PUBLIC_SIZE, P256_UNCOMPRESSED_SIZE,
                               PUBLIC_KEY_SIZE, MLKEM_CIPHERTEXT_SIZE, POSTQUANTUM_LABELS, kem_shared_secret,
                               key_schedule, Recipient)

__all__ = ["RECIPIENT_HRP", "STANZA_TYPE", "MLKEM_PUBLIC_SIZE", "P256_UNCOMPRESSED_SIZE", "PUBLIC_KEY_SIZE",
           "MLKEM_CIPHERTEXT_SIZE", "POSTQUANTUM_LABELS", "kem_shared_secret", "key_schedule", "Recipient"]
