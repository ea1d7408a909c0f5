"""Bech32 (BIP 173) as age uses it: no length limit, single-case only.

age keys are Bech32 strings whose data part can be thousands of characters
long (post-quantum recipients are ~1,950), so the 90-character limit of BIP 173
is not applied. The checksum is always computed over the lowercase string.
"""

from collections.abc import Iterable

_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_VALUES = {c: i for i, c in enumerate(_CHARSET)}
_GENERATOR = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)


class Bech32Error(ValueError):
    """The string is not valid Bech32."""


def _polymod(values: Iterable[int]) -> int:
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for i in range(5):
            if (top >> i) & 1:
                chk ^= _GENERATOR[i]
    return chk


def _hrp_expand(hrp: str) -> list[int]:
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


def _convert_bits(data: Iterable[int], from_bits: int, to_bits: int, pad: bool) -> list[int]:
    acc = 0
    bits = 0
    out = []
    maxv = (1 << to_bits) - 1
    for value in data:
        acc = (acc << from_bits) | value
        bits += from_bits
        while bits >= to_bits:
            bits -= to_bits
            out.append((acc >> bits) & maxv)
    if pad:
        if bits:
            out.append((acc << (to_bits - bits)) & maxv)
    elif bits >= from_bits or (acc << (to_bits - bits)) & maxv:
        raise Bech32Error("invalid padding in data part")
    return out


def encode(hrp: str, data: bytes) -> str:
    """Encode `data` under human-readable part `hrp`, in `hrp`'s case."""
    lower = hrp.lower()
    if hrp not in (lower, hrp.upper()):
        raise Bech32Error("mixed-case human-readable part")
    values = _convert_bits(data, 8, 5, True)
    checksum = _polymod(_hrp_expand(lower) + values + [0] * 6) ^ 1
    values += [(checksum >> 5 * (5 - i)) & 31 for i in range(6)]
    s = lower + "1" + "".join(_CHARSET[v] for v in values)
    return s if hrp == lower else s.upper()


def decode(s: str) -> tuple[str, bytes]:
    """Return (hrp, data); the hrp is returned in the case it was written in."""
    if any(ord(c) < 33 or ord(c) > 126 for c in s):
        raise Bech32Error("invalid character")
    lower = s.lower()
    if s not in (lower, s.upper()):
        raise Bech32Error("mixed case")
    pos = lower.rfind("1")
    if pos < 1 or pos + 7 > len(lower):
        raise Bech32Error("separator '1' at invalid position")
    hrp = lower[:pos]
    try:
        values = [_VALUES[c] for c in lower[pos + 1:]]
    except KeyError:
        raise Bech32Error("invalid character in data part") from None
    if _polymod(_hrp_expand(hrp) + values) != 1:
        raise Bech32Error("invalid checksum")
    data = bytes(_convert_bits(values[:-6], 5, 8, False))
    return s[:pos], data
