"""Bech32 encoding (BIP 173) of age key strings, for the oracles' key files.

Written here rather than borrowed from the implementation under test, so a
bug there cannot make the oracles agree with it.
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
