"""The native scrypt recipient type: passphrase encryption.

An scrypt stanza must be alone in its header: a passphrase authenticates the
file, and any other stanza would let someone else produce a file that decrypts
with it.
"""

import os
import re

from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from . import sodium
from ..errors import DecryptError, HeaderError, RecipientError
from ..format.grammar import Stanza, b64decode, b64encode, scrypt_not_alone
from ..primitives import FILE_KEY_SIZE, passphrase_bytes, unwrap_file_key, wrap_file_key

STANZA_TYPE = "scrypt"
_SALT_LABEL = b"age-encryption.org/v1/scrypt"
_WORK_FACTOR = re.compile(r"[1-9][0-9]*")
DEFAULT_WORK_FACTOR = 18
DEFAULT_MAX_WORK_FACTOR = 22


# More memory than any work factor up to 30 needs (1 TiB): PyNaCl's own
# cap, 32 MiB unless told, would refuse work factor 15 and up. Only the
# machine's memory bounds it, as it bounds OpenSSL's.
_ANY_MEMORY = 1 << 62


def _wrap_key(passphrase: bytes, salt: bytes, log_n: int) -> bytes:
    # libsodium's scrypt takes 0.55 s at work factor 18 where OpenSSL's takes
    # 0.72-0.78 (pyrage's, RustCrypto's, 0.77): any scrypt of note pays for
    # PyNaCl's import (4 ms) at once.
    libsodium = sodium.bindings()
    if libsodium is None or not libsodium.has_crypto_pwhash_scryptsalsa208sha256:   # a minimal libsodium has none
        return Scrypt(_SALT_LABEL + salt, 32, 1 << log_n, 8, 1).derive(passphrase)
    try:
        key: bytes = libsodium.crypto_pwhash_scryptsalsa208sha256_ll(
            passphrase, _SALT_LABEL + salt, 1 << log_n, 8, 1, 32, maxmem=_ANY_MEMORY)
    except RuntimeError:
        # Its only failure for valid parameters: the memory would not come.
        raise MemoryError(f"not enough memory for scrypt with work factor {log_n}: "
                          f"it needs {1024 << log_n >> 20} MiB") from None
    return key


def _check_work_factor(name: str, value: object) -> None:
    # A bool is an int to Python, and True would have been work factor 1.
    if type(value) is not int or not 1 <= value <= 30:
        raise ValueError(f"{name} must be an integer from 1 to 30")


class Recipient:
    """Encrypts to a passphrase, with scrypt work factor 2**work_factor."""

    # What make_header's refusal names: a passphrase must be the only recipient of a file.
    passphrase = True

    def __init__(self, passphrase: str | bytes, work_factor: int = DEFAULT_WORK_FACTOR):
        _check_work_factor("work_factor", work_factor)
        self._passphrase = passphrase_bytes(passphrase)
        if not self._passphrase:
            # As age's NewScryptRecipient: no age command could open the file (they refuse an empty passphrase).
            raise RecipientError("passphrase can't be empty")
        self._work_factor = work_factor
        # A label no other recipient shares, so this one cannot be mixed.
        self.labels = frozenset({os.urandom(16).hex()})

    def __repr__(self) -> str:
        return f"<passphrase.Recipient work_factor={self._work_factor}>"

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """One scrypt stanza: the file key wrapped under the passphrase, with a fresh salt."""
        salt = os.urandom(16)
        key = _wrap_key(self._passphrase, salt, self._work_factor)
        # A new label at each wrap, as age's WrapWithLabels: this recipient given twice cannot be mixed with itself.
        self.labels = frozenset({os.urandom(16).hex()})
        return [Stanza(STANZA_TYPE, [b64encode(salt), str(self._work_factor)], wrap_file_key(key, file_key))]


def check_alone(stanzas: list[Stanza]) -> None:
    """HeaderError where an scrypt stanza is not alone in the header: a passphrase must be a file's only
    recipient (checked before a passphrase is asked for, as age checks it)."""
    if scrypt_not_alone(stanzas):
        raise HeaderError("an scrypt recipient must be the only one")     # age's words


def asked_identity(passphrase: str) -> "Identity":
    """The identity for a passphrase a user was asked for, to open a passphrase-encrypted file (age's
    LazyScryptIdentity): DecryptError for an empty one, as age's NewScryptIdentity refuses it, rather than
    scrypt's seconds and "incorrect passphrase"."""
    if not passphrase:
        raise DecryptError("passphrase can't be empty")
    return Identity(passphrase)


class Identity:
    """Decrypts files encrypted to a passphrase, up to a work factor cap."""

    # age 1.3 tries its own identity types (X25519, hybrid, scrypt) before any other, whatever the order given
    # (agefast.header.open_file_key)
    tried_first = True

    def __init__(self, passphrase: str | bytes, max_work_factor: int = DEFAULT_MAX_WORK_FACTOR):
        _check_work_factor("max_work_factor", max_work_factor)
        self._passphrase = passphrase_bytes(passphrase)
        self._max_work_factor = max_work_factor

    def __repr__(self) -> str:
        return f"<passphrase.Identity max_work_factor={self._max_work_factor}>"

    def unwrap(self, stanzas: list[Stanza]) -> bytes | None:
        """The file key from the scrypt stanza, or None if the passphrase does not open it.

        HeaderError if an scrypt stanza is not alone in the header, is
        malformed, or asks for a work factor above max_work_factor."""
        check_alone(stanzas)
        for s in stanzas:
            if s.type != STANZA_TYPE:
                continue
            if len(s.args) != 2:
                raise HeaderError("invalid scrypt stanza: wrong number of arguments")
            try:
                salt = b64decode(s.args[0])
            except ValueError:
                raise HeaderError("invalid scrypt stanza: malformed salt") from None
            if len(salt) != 16:
                raise HeaderError("invalid scrypt stanza: salt is not 16 bytes")
            if not _WORK_FACTOR.fullmatch(s.args[1]):
                raise HeaderError("invalid scrypt stanza: malformed work factor")
            # More digits than the limit's is above it (no leading zeros): int() of more than 4,300 digits raises.
            if len(s.args[1]) > len(str(self._max_work_factor)) or int(s.args[1]) > self._max_work_factor:
                raise HeaderError(
                    f"scrypt work factor {s.args[1][:8]} is above the limit of {self._max_work_factor}")
            log_n = int(s.args[1])
            if len(s.body) != FILE_KEY_SIZE + 16:
                raise HeaderError("invalid scrypt stanza: body is not 32 bytes")
            file_key = unwrap_file_key(_wrap_key(self._passphrase, salt, log_n), s.body)
            if file_key is not None:
                return file_key
        return None

