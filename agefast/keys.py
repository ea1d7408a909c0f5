"""Identity files and recipients files: one key per line, `#` comments."""

from . import pq, x25519
from .errors import IdentityError, RecipientError

# Bech32 prefixes, upper-case for identities and lower-case for recipients,
# as they appear in files; the longer prefix must be tried first.
_IDENTITY_TYPES = (("AGE-SECRET-KEY-PQ-1", pq.Identity), ("AGE-SECRET-KEY-1", x25519.Identity))
_RECIPIENT_TYPES = (("age1pq1", pq.Recipient), ("age1", x25519.Recipient))


def _lines(text: str):
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            yield number, line


def parse_identity(s: str):
    for prefix, cls in _IDENTITY_TYPES:
        if s.startswith(prefix):
            return cls.from_str(s)
    raise IdentityError("unknown identity type")


def parse_recipient(s: str):
    for prefix, cls in _RECIPIENT_TYPES:
        if s.startswith(prefix):
            return cls.from_str(s)
    raise RecipientError("unknown recipient type")


def parse_identities(text: str) -> list:
    """Parse identity-file text: one identity per line, `#` comments."""
    out = []
    for number, line in _lines(text):
        try:
            out.append(parse_identity(line))
        except IdentityError as e:
            # Never echo the line itself: it may be a secret key.
            raise IdentityError(f"malformed identity on line {number}: {e}") from None
    if not out:
        raise IdentityError("no identities found")
    return out


def parse_recipients(text: str) -> list:
    """Parse recipients-file text: one recipient per line, `#` comments."""
    out = []
    for number, line in _lines(text):
        try:
            out.append(parse_recipient(line))
        except RecipientError as e:
            raise RecipientError(f"malformed recipient on line {number}: {e}") from None
    if not out:
        raise RecipientError("no recipients found")
    return out
