"""The slow reference decryptor: age v1 straight from the spec, on
cryptography's primitives, sharing no code with agefast.

It decides what every file *should* do: its outcome kind and the plaintext of
the chunks that genuinely verify, in order (the most any decryptor may ever
release). STREAM follows Go age: a full chunk is tried as a middle chunk and
then as a final one; data after a final chunk is trailing data; an empty final
chunk is invalid unless it is the only chunk.
"""

import base64
import binascii
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from . import armor
from .primitives import (FILE_KEY_SIZE, NONCE_SIZE, SCRYPT_LABEL, SEALED_CHUNK_SIZE, TAG_SIZE, b64_strict,
                         chunk_nonce, header_mac, payload_key, x25519_public, x25519_shared, x25519_wrap_key)

# Outcome kinds, one per age outcome.
OK, HEADER, MAC, NO_MATCH, PAYLOAD, ARMOR = "ok", "header", "mac", "no-match", "payload", "armor"
MAX_SCRYPT_WORK_FACTOR = 22


@dataclass
class Verdict:
    kind: str
    plaintext: bytes  # all of it on OK; otherwise the verified prefix
    detail: str = ""


class Failure(Exception):
    """Why the reference rejects a file: an outcome kind and the verified prefix."""

    def __init__(self, kind: str, detail: str, prefix: bytes = b""):
        super().__init__(detail)
        self.kind, self.detail, self.prefix = kind, detail, prefix


class ArmorFailure(Failure):
    """Broken armor; `intact` is what its leading well-formed lines decode to."""

    def __init__(self, detail: str, intact: bytes):
        super().__init__(ARMOR, detail)
        self.intact = intact


def _intact(lines: list[bytes]) -> bytes:
    """What a streaming armor decoder has decoded before the defect: the body
    lines after BEGIN that are full canonical 64-column lines, and a shorter
    canonical line ending them."""
    out = bytearray()
    for line in lines[1:] if lines and lines[0].rstrip(b"\r") == armor.BEGIN else ():
        line = line[:-1] if line.endswith(b"\r") else line
        try:
            part = base64.b64decode(line, validate=True) if 0 < len(line) <= 64 else None
        except binascii.Error:
            part = None
        if part is None or base64.b64encode(part) != line:
            break
        out += part
        if len(line) < 64:
            break
    return bytes(out)


def _dearmor(data: bytes) -> bytes:
    try:
        return _dearmor_strict(data)
    except Failure as f:
        raise ArmorFailure(f.detail, _intact(data.split(b"\n"))) from None


def _dearmor_strict(data: bytes) -> bytes:
    lines = data.split(b"\n")
    # A file ends with a newline after the END line; tolerate trailing
    # whitespace only, as age does.
    while lines and not lines[-1].strip():
        lines.pop()
    lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
    if len(lines) < 2 or lines[0] != armor.BEGIN or lines[-1] != armor.END:
        raise Failure(ARMOR, "missing or malformed armor BEGIN/END line")
    body = lines[1:-1]
    if not body:
        raise Failure(ARMOR, "empty armor body")
    for i, line in enumerate(body):
        last = i == len(body) - 1
        if len(line) > 64 or (not last and len(line) != 64) or not line:
            raise Failure(ARMOR, "armor line of the wrong length")
    text = b"".join(body)
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise Failure(ARMOR, "invalid armor base64") from None
    if base64.b64encode(raw) != text:
        raise Failure(ARMOR, "non-canonical armor base64")
    return raw


def _line(data: bytes, pos: int) -> tuple[bytes, int]:
    end = data.find(b"\n", pos)
    if end < 0:
        raise Failure(HEADER, "header ends early")
    return data[pos:end], end + 1


def _parse_header(data: bytes):
    """Return (stanzas as (args, body), mac_input, mac, end offset)."""
    line, pos = _line(data, 0)
    if line != b"age-encryption.org/v1":
        raise Failure(HEADER, "bad version line")
    stanzas = []
    while True:
        start = pos
        line, pos = _line(data, pos)
        if line.startswith(b"---"):
            if not stanzas:
                raise Failure(HEADER, "no stanza")
            mac = b64_strict(line[4:]) if line.startswith(b"--- ") else None
            if mac is None or len(mac) != 32:
                raise Failure(HEADER, "malformed MAC line")
            return stanzas, data[:start + 3], mac, pos
        if not line.startswith(b"-> "):
            raise Failure(HEADER, "malformed stanza line")
        args = line[3:].split(b" ")
        if not all(a and all(33 <= c <= 126 for c in a) for a in args):
            raise Failure(HEADER, "malformed stanza arguments")
        body = b""
        while True:
            line, pos = _line(data, pos)
            part = b64_strict(line) if len(line) <= 64 else None
            if part is None:
                raise Failure(HEADER, "malformed stanza body")
            body += part
            if len(line) < 64:
                break
        stanzas.append(([a.decode() for a in args], body))


def _unwrap(body: bytes, key: bytes) -> bytes | None:
    try:
        return ChaCha20Poly1305(key).decrypt(bytes(12), body, None)
    except InvalidTag:
        return None


def _unwrap_x25519(spec, stanzas) -> bytes | None:
    public = x25519_public(spec.secret)
    for args, body in stanzas:
        if args[0] != "X25519":
            continue
        share = b64_strict(args[1].encode()) if len(args) == 2 else None
        if share is None or len(share) != 32 or len(body) != 32:
            raise Failure(HEADER, "malformed X25519 stanza")
        shared = x25519_shared(spec.secret, share)
        if shared is None:
            raise Failure(HEADER, "X25519 share is a low-order point")
        file_key = _unwrap(body, x25519_wrap_key(shared, share, public))
        if file_key is not None:
            return file_key
    return None


def _unwrap_scrypt(spec, stanzas) -> bytes | None:
    for args, body in stanzas:
        if args[0] != "scrypt":
            continue
        if len(stanzas) != 1:
            raise Failure(HEADER, "scrypt stanza is not alone")
        if len(args) != 3 or not args[2].isdigit() or args[2].startswith("0") or len(args[2]) > 2:
            raise Failure(HEADER, "malformed scrypt stanza")
        salt, log_n = b64_strict(args[1].encode()), int(args[2])
        if salt is None or len(salt) != 16 or len(body) != 32:
            raise Failure(HEADER, "malformed scrypt stanza")
        if log_n > MAX_SCRYPT_WORK_FACTOR:
            raise Failure(HEADER, "scrypt work factor too large")
        key = Scrypt(SCRYPT_LABEL + salt, 32, 1 << log_n, 8, 1).derive(spec.secret.encode())
        return _unwrap(body, key)
    return None


_UNWRAP = {"x25519": _unwrap_x25519, "passphrase": _unwrap_scrypt}


def _open_payload(key: bytes, payload: bytes) -> bytes:
    aead = ChaCha20Poly1305(key)
    out = []
    index = pos = 0
    while True:
        sealed = payload[pos:pos + SEALED_CHUNK_SIZE]
        pos += len(sealed)
        if not sealed:
            raise Failure(PAYLOAD, "no final chunk", b"".join(out))
        last = len(sealed) < SEALED_CHUNK_SIZE
        if last and index and len(sealed) == TAG_SIZE:
            raise Failure(PAYLOAD, "empty final chunk", b"".join(out))
        plain = None
        for final in ((True,) if last else (False, True)):
            try:
                plain = aead.decrypt(chunk_nonce(index, final), sealed, None)
                last = final
                break
            except InvalidTag:
                continue
        if plain is None:
            raise Failure(PAYLOAD, f"chunk {index} does not verify", b"".join(out))
        out.append(plain)
        index += 1
        if last:
            if pos < len(payload):
                raise Failure(PAYLOAD, "trailing data", b"".join(out))
            return b"".join(out)


def open_header(data: bytes, identities) -> tuple[bytes, bytes]:
    """Return (payload key, payload) of an age file; raises Failure."""
    if data.startswith(b"-----BEGIN"):
        data = _dearmor(data)
    stanzas, mac_input, mac, end = _parse_header(data)
    file_key = None
    for spec in identities:
        file_key = _UNWRAP[spec.kind](spec, stanzas)
        if file_key is not None:
            break
    if file_key is None:
        raise Failure(NO_MATCH, "no identity matched")
    if len(file_key) != FILE_KEY_SIZE:
        raise Failure(HEADER, "file key of the wrong size")
    if header_mac(file_key, mac_input) != mac:
        raise Failure(MAC, "header MAC mismatch")
    nonce = data[end:end + NONCE_SIZE]
    if len(nonce) != NONCE_SIZE:
        raise Failure(HEADER, "truncated payload nonce")
    return payload_key(file_key, nonce), data[end + NONCE_SIZE:]


def open_file(data: bytes, identities) -> Verdict:
    """Decrypt `data` with KeySpecs `identities`; never raises on bad input.

    On broken armor the verified prefix is that of the file its intact lines
    decode to: a streaming decoder (Go age's) releases those chunks before it
    reaches the defect, as it would before a payload failure.
    """
    try:
        return Verdict(OK, _open_payload(*open_header(data, identities)))
    except ArmorFailure as f:
        return Verdict(ARMOR, open_file(f.intact, identities).plaintext if f.intact else b"", f.detail)
    except Failure as f:
        return Verdict(f.kind, f.prefix, f.detail)
