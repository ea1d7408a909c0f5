"""`-j batchpass`: passphrase encryption without a terminal, as age 1.3's
age-plugin-batchpass does it, built into the agefast command.

The passphrase comes from $AGE_PASSPHRASE, or from the file descriptor named
by $AGE_PASSPHRASE_FD (trailing newlines stripped). $AGE_PASSPHRASE_WORK_FACTOR
sets the scrypt work factor when encrypting (1-30, default 18), and
$AGE_PASSPHRASE_MAX_WORK_FACTOR caps the one accepted when decrypting (1-30).
Messages are the plugin's, so scripts that match them work with agefast.
"""

import os
from typing import TYPE_CHECKING

from ..errors import DecryptError, EncryptError
from ..format.grammar import Stanza

if TYPE_CHECKING:
    from . import scrypt

NAME = "batchpass"
_MAX_PASSPHRASE_SIZE = 1024 * 1024


class BatchpassError(Exception):
    """The environment does not give a usable passphrase or work factor."""


# The largest descriptor a C int holds: open() takes no larger (an OverflowError).
_MAX_FD = 2**31 - 1


def _number(variable: str, text: str) -> int:
    """The number `text` of the environment `variable`: ASCII digits only, after a "+" if any, as Go's
    strconv.Atoi reads them here (int() also takes "-1", "1_0" and other scripts' digits, and "-1" went on to a
    ValueError; a negative number is refused as none, where Atoi's is then out of range)."""
    unsigned = text[1:] if text.startswith("+") else text
    if not (unsigned.isascii() and unsigned.isdigit()):
        raise BatchpassError(f"invalid {variable}: {text!r} is not a number")
    # More than 19 digits is above every bound here, and int() refuses more than 4,300.
    digits = unsigned.lstrip("0")
    return int(digits or "0") if len(digits) <= 19 else 10 ** 19


def passphrase_file() -> str | None:
    """The file the passphrase is read from, as /dev/fd/N where $AGE_PASSPHRASE_FD is N and $AGE_PASSPHRASE
    is not set (what _passphrase reads); None otherwise."""
    fd_text = os.environ.get("AGE_PASSPHRASE_FD", "")
    if os.environ.get("AGE_PASSPHRASE") or not fd_text:
        return None
    try:
        return f"/dev/fd/{_number('AGE_PASSPHRASE_FD', fd_text)}"
    except BatchpassError:
        return None     # _passphrase says why


def _passphrase() -> str:
    value = os.environ.get("AGE_PASSPHRASE", "")
    fd_text = os.environ.get("AGE_PASSPHRASE_FD", "")
    if value and fd_text:
        raise BatchpassError("AGE_PASSPHRASE and AGE_PASSPHRASE_FD are mutually exclusive")
    if not value and not fd_text:
        raise BatchpassError("either AGE_PASSPHRASE or AGE_PASSPHRASE_FD must be set")
    if value:
        return value
    fd = _number("AGE_PASSPHRASE_FD", fd_text)
    if fd > _MAX_FD:
        raise BatchpassError(f"failed to read passphrase from fd {fd}: Bad file descriptor")
    try:
        with open(fd, "rb", closefd=True) as f:
            data = f.read(_MAX_PASSPHRASE_SIZE + 1)
    except OSError as e:
        raise BatchpassError(f"failed to read passphrase from fd {fd}: {e.strerror or e}") from None
    if len(data) > _MAX_PASSPHRASE_SIZE:
        raise BatchpassError(f"passphrase from fd {fd} is too long")
    # any bytes, as age takes them (agefast.primitives.passphrase_bytes gives them back)
    secret = data.decode("utf-8", "surrogateescape").rstrip("\r\n")
    if not secret:
        # As age's NewScryptRecipient and NewScryptIdentity: an empty file (a secret that was never written)
        # must not become a passphrase anyone can guess.
        raise BatchpassError("passphrase can't be empty")
    return secret


def _work_factor(variable: str) -> int | None:
    text = os.environ.get(variable, "")
    if not text:
        return None
    value = _number(variable, text)
    if not 1 <= value <= 30:
        raise BatchpassError(f"{variable} must be between 1 and 30")
    return value


def _from_environment(work_factor_variable: str, error: type[Exception]) -> tuple[str, int | None]:
    """The passphrase, and the work factor setting named (None if unset)."""
    try:
        return _passphrase(), _work_factor(work_factor_variable)
    except BatchpassError as e:
        raise error(f"{NAME}: {e}") from None


def recipient() -> "scrypt.Recipient":
    """The scrypt recipient for `age -e -j batchpass`."""
    # Imported on use: scrypt's backend costs every other command 10 ms.
    from . import scrypt

    secret, work_factor = _from_environment("AGE_PASSPHRASE_WORK_FACTOR", EncryptError)
    return scrypt.Recipient(secret, work_factor or scrypt.DEFAULT_WORK_FACTOR)


class Identity:
    """The identity for `age -d -j batchpass`: the file must be passphrase-encrypted.

    Unlike a passphrase prompt, it never lets other identities be tried: a
    script that asks for batchpass means the passphrase to be the way in.
    """

    def unwrap(self, stanzas: list[Stanza]) -> bytes:
        from . import scrypt

        if not (len(stanzas) == 1 and stanzas[0].type == scrypt.STANZA_TYPE):
            if any(s.type == scrypt.STANZA_TYPE for s in stanzas):
                raise DecryptError(f"{NAME}: an scrypt recipient must be the only one")
            raise DecryptError(f"{NAME}: file is not passphrase-encrypted")
        secret, max_work_factor = _from_environment("AGE_PASSPHRASE_MAX_WORK_FACTOR", DecryptError)
        identity = scrypt.Identity(secret, max_work_factor or scrypt.DEFAULT_MAX_WORK_FACTOR)
        file_key = identity.unwrap(stanzas)
        if file_key is None:
            raise DecryptError(f"{NAME}: incorrect passphrase")
        return file_key
