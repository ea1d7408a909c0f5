"""What every key written as one Bech32 string of raw bytes has in common."""

from . import bech32


class Bech32Key:
    """A key that is `HRP` + "1" + Bech32 of its raw bytes, `self._raw`.

    Subclasses set HRP, ERROR (RecipientError or IdentityError) and KIND (a
    name for messages), and validate the raw bytes in __init__.
    """

    HRP: str
    ERROR: type[Exception]
    KIND: str
    _raw: bytes

    @classmethod
    def from_str(cls, s: str):
        try:
            hrp, data = bech32.decode(s)
        except bech32.Bech32Error as e:
            raise cls.ERROR(f"malformed {cls.KIND}: {e}") from None
        if hrp != cls.HRP:
            raise cls.ERROR(f"malformed {cls.KIND}: unexpected prefix {hrp[:32]!r}")
        return cls(data)

    def __str__(self) -> str:
        return bech32.encode(self.HRP, self._raw)

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other._raw == self._raw

    def __hash__(self) -> int:
        return hash((type(self), self._raw))
