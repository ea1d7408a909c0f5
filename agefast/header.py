"""Making and opening age headers: wrapping the file key for recipients,
unwrapping it with identities, and the header MAC."""

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .errors import EncryptError, HeaderError, HeaderMACError, NoIdentityMatchError
from .format.grammar import Stanza, encode_header_without_mac, encode_mac_line, parse_header
from .primitives import FILE_KEY_SIZE, hkdf, hmac_sha256, hmac_sha256_matches
from .payload.rules import NONCE_SIZE, payload_key

if TYPE_CHECKING:
    from .io.source import HeaderSource
    from ._typing import Identity, Recipient


def _mac_key(file_key: bytes) -> bytes:
    return hkdf(file_key, b"", b"header")


def make_header(recipients: "list[Recipient]", file_key: bytes | None = None) -> tuple[bytes, bytes]:
    """Return (header bytes ending in newline, file key) for `recipients`,
    a non-empty list of recipient objects (agefast._arguments checks it).

    The file key is a new random one unless given (by a payload sealed
    before its header: agefast.cli.early_payload)."""
    if file_key is None:
        file_key = os.urandom(FILE_KEY_SIZE)
    stanzas: list[Stanza] = []
    first: frozenset[str] = frozenset()
    for i, r in enumerate(recipients):
        stanzas.extend(r.wrap(file_key))
        # Labels are read after each wrap, as a plugin learns its own only then, and compared at once, as age
        # does: no recipient after the first that cannot be mixed is wrapped (a plugin's never run). Recipients
        # that may be mixed share the same set; a lone one has none to match (not read: 1.4 us of a 1 KiB
        # encryption).
        if len(recipients) > 1:
            labels = frozenset(getattr(r, "labels", frozenset()))
            if i == 0:
                first = labels
            elif labels != first:
                raise _incompatible(first, labels, (recipients[0], r))
    without_mac = encode_header_without_mac(stanzas)
    return without_mac + encode_mac_line(hmac_sha256(_mac_key(file_key), without_mac)), file_key


def _labels(labels: frozenset[str]) -> str:
    return f"labels '{', '.join(sorted(labels))}'" if labels else "no labels"     # as rage words them


def _incompatible(a: frozenset[str], b: frozenset[str], pair: tuple[object, object]) -> EncryptError:
    """age's "incompatible recipients" (its tests match it) with rage's words (pyrage's tests match them)."""
    if any(getattr(r, "passphrase", False) for r in pair):
        # Its label is a random one, which no other recipient shares.
        return EncryptError("incompatible recipients: a passphrase must be the only recipient of a file")
    if ("postquantum" in a) != ("postquantum" in b):
        pq, classic = (a, b) if "postquantum" in a else (b, a)
        return EncryptError(
            "incompatible recipients: can't mix post-quantum and classic recipients, or the file would be "
            f"vulnerable to quantum computers (Cannot encrypt to a recipient with {_labels(pq)} alongside a "
            f"recipient with {_labels(classic)})")
    # Labels a plugin asked for, as age words it (%q of each sorted list).
    quoted = ("[" + " ".join(f'"{label}"' for label in sorted(labels)) + "]" for labels in (a, b))
    return EncryptError(f"incompatible recipients: {' and '.join(quoted)} can't be mixed")


def _no_match(types: list[str]) -> NoIdentityMatchError:
    # The types come from the file: name a few distinct ones, each cut short.
    seen = list(dict.fromkeys(types))
    named = ", ".join(t[:40] for t in seen[:8]) + (", ..." if len(seen) > 8 else "")
    return NoIdentityMatchError(
        f"No matching keys found: no identity matched any of the recipients (the file's stanzas: {named})", types)


def open_file_key(source: "HeaderSource", identities: "Iterable[Identity]") -> bytes:
    """Parse the header from `source` and return the file key, once the
    header MAC matches it.

    Leaves `source` at the payload (its nonce). Raises HeaderError,
    NoIdentityMatchError or HeaderMACError, in age's order of checks.
    """
    header = parse_header(source)
    file_key = None
    # As age 1.3 (Decrypt): its own identity types first, the others (an identity file encrypted to a
    # passphrase, an SSH key, a plugin) after, each group in the order given. A file one of the first opens
    # then asks for no passphrase and runs no plugin.
    for identity in sorted(identities, key=lambda i: not getattr(i, "tried_first", False)):
        file_key = identity.unwrap(header.stanzas)
        if file_key is not None:
            break
    if file_key is None:
        raise _no_match([s.type for s in header.stanzas])
    if len(file_key) != FILE_KEY_SIZE:
        raise HeaderError("unwrapped file key has the wrong length")
    if not hmac_sha256_matches(_mac_key(file_key), header.mac_input, header.mac):
        raise HeaderMACError("header MAC does not match: the header was modified, or the key is wrong")
    return file_key


ENDS_BEFORE_NONCE = "the file is truncated: it ends before the payload nonce"


def open_header(source: "HeaderSource", identities: "Iterable[Identity]") -> bytes:
    """Parse the header from `source` and return the payload key.

    Leaves `source` at the first chunk; errors as open_file_key's, or
    HeaderError if the file ends before the payload nonce.
    """
    file_key = open_file_key(source, identities)
    nonce = source.read(NONCE_SIZE)
    if len(nonce) != NONCE_SIZE:
        raise HeaderError(ENDS_BEFORE_NONCE)
    # cryptography's HMAC passed in: payload_key's own import of it costs a
    # small file's decryption ~4 us a call (2026-12-02, medians of 5000).
    return payload_key(file_key, nonce, hmac_sha256)
