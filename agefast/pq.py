"""The native post-quantum hybrid recipient type, "mlkem768x25519" (age v1.3).

This module is the public name of agefast.recipients.pq (pyrage's name),
where the design is described.
"""

from .recipients.pq import (RECIPIENT_HRP, IDENTITY_HRP, STANZA_TYPE, PUBLIC_KEY_SIZE, ENC_SIZE, POSTQUANTUM_LABELS,
                            Recipient, Identity)

__all__ = ["RECIPIENT_HRP", "IDENTITY_HRP", "STANZA_TYPE", "PUBLIC_KEY_SIZE", "ENC_SIZE", "POSTQUANTUM_LABELS",
           "Recipient", "Identity"]
