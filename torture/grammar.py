"""Header grammar cases: headers that differ from a valid one in their
syntax only (line endings, spacing, base64 form, line lengths, argument
bytes, the MAC line), each with a correct MAC over its own bytes, so that
parsing alone decides. A few are valid (unknown stanzas, which every
implementation must skip) and must decrypt.

Every case names the outcomes it intends; the reference and the targets
then decide as for the tamper matrix.
"""

from .forge import VERSION_LINE, Forged
from .primitives import b64, header_mac, loosened
from .reference import HEADER, NO_MATCH, OK


def _file(f: Forged, mac_input: bytes, mac_line: bytes | None = None) -> bytes:
    """mac_input (through "---") with a correct MAC line, then f's nonce and payload."""
    if mac_line is None:
        mac_line = b" " + b64(header_mac(f.file_key, mac_input)) + b"\n"
    return mac_input + mac_line + f.nonce + b"".join(f.sealed)


def cases(f: Forged, rng):
    """(name, file bytes, intended outcomes) for the header of `f` (one X25519 stanza)."""
    args, body = f.header[len(VERSION_LINE):f.header.rindex(b"---")].splitlines(keepends=True)
    x25519 = args + body
    full = b64(rng.randbytes(48))  # exactly 64 columns: the body needs a short line after it
    grease = b"-> grease-arg1 A+b/9\n" + full + b"\n" + b"\n"

    def header(*stanzas: bytes, version: bytes = VERSION_LINE) -> bytes:
        return version + b"".join(stanzas) + b"---"

    # Valid: unknown stanzas are skipped.
    yield "unknown stanza with a 64-column body first", _file(f, header(grease, x25519)), {OK}
    yield "unknown stanza with no arguments and an empty body last", _file(f, header(x25519, b"-> grease\n\n")), {OK}
    yield "lower-case stanza type alone", _file(f, header(b"-> x25519" + args[len(b"-> X25519"):] + body)), {NO_MATCH}

    # Line structure.
    yield "CRLF line endings", _file(f, header(x25519).replace(b"\n", b"\r\n")), {HEADER}
    yield "version line with a trailing space", _file(f, header(x25519, version=b"age-encryption.org/v1 \n")), {HEADER}
    yield "version v2", _file(f, header(x25519, version=b"age-encryption.org/v2\n")), {HEADER}
    # The spec's grammar is "v1-line 1*stanza end": Go age parses it and finds no identity matched.
    yield "header with no stanza", _file(f, header()), {HEADER}
    yield "empty line between stanzas", _file(f, header(grease, b"\n", x25519)), {HEADER}
    yield "no short line after a 64-column body", _file(f, header(grease[:-1], x25519)), {HEADER}
    # The C2SP vectors stanza_missing_final_line and stanza_missing_body: the
    # last stanza before the MAC line ends on a full line, or has no body line.
    yield "64-column body right before the MAC", _file(f, header(x25519, grease[:-1])), {HEADER}
    yield "stanza with no body line before the MAC", _file(f, header(x25519, b"-> grease\n")), {HEADER}
    yield "65-column body line", _file(f, header(b"-> grease\n" + full + b"A\n" + b"\n", x25519)), {HEADER}

    # Stanza argument lines.
    yield "'->' without its space", _file(f, header(b"->" + x25519[3:])), {HEADER}
    yield "two spaces between arguments", _file(f, header(x25519.replace(b"X25519 ", b"X25519  ", 1))), {HEADER}
    yield "stanza with an empty type", _file(f, header(b"-> \n\n", x25519)), {HEADER}
    yield "argument with a DEL byte", _file(f, header(b"-> grease a\x7fb\n\n", x25519)), {HEADER}
    yield "X25519 stanza with two arguments", _file(f, header(args[:-1] + b" extra\n" + body)), {HEADER}
    yield "X25519 share of 31 bytes", _file(f, header(b"-> X25519 " + b64(rng.randbytes(31)) + b"\n" + body)), {HEADER}

    # Body base64.
    yield "X25519 body of 31 bytes", _file(f, header(args + b64(rng.randbytes(31)) + b"\n")), {HEADER}
    yield "padded base64 body", _file(f, header(args + body[:-1] + b"=\n")), {HEADER}
    # 32 bytes take 43 characters; the last one carries 2 unused bits.
    yield "non-canonical base64 body (an unused bit set)", _file(f, header(args + loosened(body[:-1]) + b"\n")), {
        HEADER}
    # The share (32 bytes, 43 characters) too: a second spelling of one header (C2SP x25519_not_canonical_share).
    yield "non-canonical base64 share (an unused bit set)", _file(f, header(loosened(args[:-1]) + b"\n" + body)), {
        HEADER}


    # The MAC line.
    mac = b64(header_mac(f.file_key, header(x25519)))
    yield "MAC line without its space", _file(f, header(x25519), mac + b"\n"), {HEADER}
    yield "MAC with base64 padding", _file(f, header(x25519), b" " + mac + b"=\n"), {HEADER}
    yield "MAC of 31 bytes", _file(f, header(x25519), b" " + b64(rng.randbytes(31)) + b"\n"), {HEADER}
    # 32 bytes take 43 characters, 2 bits of the last unused (C2SP hmac_not_canonical).
    yield "non-canonical base64 MAC (an unused bit set)", _file(f, header(x25519), b" " + loosened(mac) + b"\n"), {
        HEADER}
