"""What every key written as one Bech32 string of raw bytes has in common."""

from typing import TYPE_CHECKING, Self

from .. import _arguments
from . import bech32


class Bech32Key:
    """A key that is `HRP` + "1" + Bech32 of its raw bytes, `self._raw`.

    Subclasses set HRP, ERROR (RecipientError or IdentityError) and KIND (a
    name for messages), and validate the raw bytes in __init__. Messages
    start with pyrage's words for the same failure ("invalid Bech32
    encoding", "incorrect HRP"), which code written for pyrage matches.
    """

    HRP: str
    ERROR: type[Exception]
    KIND: str
    _raw: bytes

    if TYPE_CHECKING:
        # Each subclass's __init__ takes the raw bytes and validates them.
        def __init__(self, raw: bytes, /) -> None: ...

    @classmethod
    def from_str(cls, v: str) -> Self:
        """The key written as the Bech32 string `v`; the type's error (RecipientError
        or IdentityError) if it is malformed or of another type."""
        try:
            hrp, data = bech32.decode(_arguments.text("v", v))
        except bech32.Bech32Error as e:
            raise cls.ERROR(f"malformed {cls.KIND}: invalid Bech32 encoding: {e}") from None
        if hrp != cls.HRP:
            raise cls.ERROR(f"malformed {cls.KIND}: incorrect HRP: unexpected prefix {hrp[:32]!r}")
        return cls(data)

    def __str__(self) -> str:
        return bech32.encode(self.HRP, self._raw)

    def __eq__(self, other: object) -> bool:
        # An identity's raw bytes are its private key: compared in constant
        # time. hmac is imported here, not with the module: it loads the
        # standard library's OpenSSL binding, ~3 ms of every command's start-up
        # (agefast.primitives).
        import hmac

        return type(other) is type(self) and hmac.compare_digest(other._raw, self._raw)

    def __hash__(self) -> int:
        return hash((type(self), self._raw))

    def __reduce__(self) -> tuple[type[Self], tuple[bytes]]:
        # Pickled as its raw bytes (cryptography's key objects do not pickle),
        # so that a tree job's workers (agefast.tree) can receive it: an
        # identity's pickle is as secret as the key.
        return type(self), (self._raw,)
