"""The p256tag recipient type (age v1.3): encryption to a tagged P-256 key.

This module is the public name of agefast.recipients.tag (pyrage's name),
where the design is described.
"""

from .recipients.tag import RECIPIENT_HRP, STANZA_TYPE, COMPRESSED_SIZE, ENC_SIZE, stanza_tag, load_p256, Recipient

__all__ = ["RECIPIENT_HRP", "STANZA_TYPE", "COMPRESSED_SIZE", "ENC_SIZE", "stanza_tag", "load_p256", "Recipient"]
