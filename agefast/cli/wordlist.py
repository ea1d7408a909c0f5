"""Generated passphrases: ten words of the BIP-39 English word list, as age makes them.

An empty answer at the -p prompt gets one. The list (2,048 words, from the
`mnemonic` package, the BIP-39 reference implementation) gives each word 11
bits and ten words 110 bits; a word is drawn by a uniform 16-bit random
number modulo 2,048, which is exact since 2,048 divides 65,536.
"""

import functools
import secrets

PASSPHRASE_WORDS = 10


@functools.cache
def words() -> list[str]:
    # Imported here: only an empty -p answer needs the list.
    from mnemonic import Mnemonic

    return Mnemonic("english").wordlist


def random_word() -> str:
    return words()[int.from_bytes(secrets.token_bytes(2), "big") % len(words())]


def generate_passphrase() -> str:
    """Ten random words joined by hyphens, "eternal-erase-keen-...", as age generates."""
    return "-".join(random_word() for _ in range(PASSPHRASE_WORDS))
