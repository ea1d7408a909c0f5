"""Bech32 (BIP 173) for age key strings: the targets' key files and reproducers.

Written here rather than borrowed from the implementation under test, so a
bug there cannot make the targets agree with it.
"""

_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_GENERATORS = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)


def _polymod(values) -> int:
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for i, g in enumerate(_GENERATORS):
            if top >> i & 1:
                chk ^= g
    return chk


def _to_5bit(data: bytes) -> list[int]:
    acc = bits = 0
    out = []
    for byte in data:
        acc = acc << 8 | byte
        bits += 8
        while bits >= 5:
            bits -= 5
            out.append(acc >> bits & 31)
    if bits:
        out.append(acc << (5 - bits) & 31)
    return out


def encode(hrp: str, data: bytes) -> str:
    """Encode `data` under `hrp`; age writes identities upper case, as here."""
    low = hrp.lower()
    words = _to_5bit(data)
    expanded = [ord(c) >> 5 for c in low] + [0] + [ord(c) & 31 for c in low]
    mod = _polymod(expanded + words + [0] * 6) ^ 1
    checksum = [mod >> 5 * (5 - i) & 31 for i in range(6)]
    text = low + "1" + "".join(_CHARSET[w] for w in words + checksum)
    return text.upper() if hrp.isupper() else text


def decode(text: str) -> tuple[str, bytes]:
    """(hrp, data) of a Bech32 string; raises ValueError on a bad checksum."""
    low = text.lower()
    hrp, sep, rest = low.rpartition("1")
    if not sep or len(rest) < 6 or any(c not in _CHARSET for c in rest):
        raise ValueError("not a Bech32 string")
    words = [_CHARSET.index(c) for c in rest]
    if _polymod([ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp] + words) != 1:
        raise ValueError("bad Bech32 checksum")
    acc = bits = 0
    out = bytearray()
    for w in words[:-6]:
        acc = acc << 5 | w
        bits += 5
        if bits >= 8:
            bits -= 8
            out.append(acc >> bits & 0xFF)
    return hrp, bytes(out)
