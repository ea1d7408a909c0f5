"""A small STREAM implementation on cryptography, with switchable bugs.

With no bugs it is a correct age X25519 implementation (header from
torture.forge, header checks from torture.reference, its own STREAM), so the
tests can show agetorture passes it and fails each broken variant.
"""

import io
import os
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from torture import forge, reference
from torture.adapter import Adapter
from torture.primitives import CHUNK_SIZE, NONCE_SIZE, SEALED_CHUNK_SIZE, TAG_SIZE, payload_key

BUGS = ("trailing-data", "ignore-final-flag", "empty-final-chunk", "early-release", "little-endian-counter",
        "nonce-reuse")


class PayloadFailure(Exception):
    pass


def _nonce(bugs, index: int, final: bool) -> bytes:
    if "nonce-reuse" in bugs:
        index = 0
    order = "<" if "little-endian-counter" in bugs else ">"
    return bytes(3) + struct.pack(order + "Q", index) + (b"\x01" if final else b"\x00")


class Writer:
    def __init__(self, dst, recipients, bugs):
        file_key = os.urandom(16)
        nonce = os.urandom(NONCE_SIZE)
        stanzas = [forge.x25519_stanza(file_key, r, os.urandom(32)) for r in recipients]
        self._dst, self._bugs = dst, bugs
        self._aead = ChaCha20Poly1305(payload_key(file_key, nonce))
        self._buf = bytearray()
        self._index = 0
        self._put(forge.header(stanzas, file_key) + nonce)

    def _put(self, data) -> None:
        mv = memoryview(data)
        while mv:
            mv = mv[self._dst.write(mv):]

    def _seal(self, final: bool) -> None:
        chunk = bytes(self._buf[:CHUNK_SIZE])
        del self._buf[:CHUNK_SIZE]
        self._put(self._aead.encrypt(_nonce(self._bugs, self._index, final), chunk, None))
        self._index += 1

    def write(self, data) -> int:
        self._buf += memoryview(data).cast("B")
        while len(self._buf) > CHUNK_SIZE:  # keep the last chunk back: it may be final
            self._seal(False)
        return len(memoryview(data).cast("B"))

    def close(self) -> None:
        self._seal(True)


class Reader:
    def __init__(self, src, identities, bugs):
        data = _read_all(src)
        key, self._payload = reference.open_header(data, identities)
        self._aead = ChaCha20Poly1305(key)
        self._key, self._bugs = key, bugs
        self._pos = self._index = 0
        self._out = bytearray()
        self._done = False
        self._pending = None  # (sealed chunk, nonce) released early and not yet verified
        self._error = None  # a failed reader keeps raising the same error

    def _next_chunk(self) -> None:
        if self._pending is not None:
            sealed, nonce = self._pending
            self._pending = None
            try:
                self._aead.decrypt(nonce, sealed, None)
            except InvalidTag:
                raise PayloadFailure("chunk failed after its plaintext was released") from None
            return
        sealed = self._payload[self._pos:self._pos + SEALED_CHUNK_SIZE]
        self._pos += len(sealed)
        if not sealed:
            if "ignore-final-flag" in self._bugs and self._index:
                self._done = True
                return
            raise PayloadFailure("no final chunk")
        last = len(sealed) < SEALED_CHUNK_SIZE
        if last and self._index and len(sealed) == TAG_SIZE and "empty-final-chunk" not in self._bugs:
            raise PayloadFailure("empty final chunk")
        if "early-release" in self._bugs and len(sealed) > TAG_SIZE:
            # Decrypt with the bare keystream and hand it out; check the tag later.
            nonce = _nonce(self._bugs, self._index, not (self._pos < len(self._payload)))
            counter_one = (1).to_bytes(4, "little")  # block 0 keys Poly1305; the data starts at block 1
            stream = Cipher(algorithms.ChaCha20(self._key, counter_one + nonce), None).decryptor()
            self._out += stream.update(sealed[:-TAG_SIZE])
            self._pending = (sealed, nonce)
            self._index += 1
            self._done = self._pos >= len(self._payload)
            return
        flags = (False, True) if "ignore-final-flag" in self._bugs or not last else (True,)
        for final in flags:
            try:
                self._out += self._aead.decrypt(_nonce(self._bugs, self._index, final), sealed, None)
                break
            except InvalidTag:
                continue
        else:
            raise PayloadFailure(f"chunk {self._index} does not verify")
        self._index += 1
        if "ignore-final-flag" in self._bugs:
            self._done = self._pos >= len(self._payload)
        elif final:
            if self._pos < len(self._payload) and "trailing-data" not in self._bugs:
                raise PayloadFailure("trailing data")
            self._done = True

    def read(self, n: int = -1) -> bytes:
        while (n < 0 or len(self._out) < n) and (not self._done or self._pending is not None):
            if self._error is None:
                try:
                    self._next_chunk()
                    continue
                except PayloadFailure as e:
                    self._error = e
            if self._out and n >= 0:
                break
            raise self._error
        n = len(self._out) if n < 0 else min(n, len(self._out))
        piece = bytes(self._out[:n])
        del self._out[:n]
        return piece

    def readinto(self, b) -> int:
        mv = memoryview(b).cast("B")
        piece = self.read(len(mv))
        mv[:len(piece)] = piece
        return len(piece)


def _read_all(src) -> bytes:
    out = bytearray()
    while piece := src.read(1 << 16):
        out += piece
    return bytes(out)


def _copy(reader, writer) -> None:
    while piece := reader.read(1 << 16):
        mv = memoryview(piece)
        while mv:
            mv = mv[writer.write(mv):]


def broken_adapter(*bugs) -> Adapter:
    unknown = set(bugs) - set(BUGS)
    if unknown:
        raise ValueError(f"unknown bugs {unknown}")

    def classify(exc):
        if isinstance(exc, reference.Failure):
            return exc.kind
        return reference.PAYLOAD if isinstance(exc, PayloadFailure) else None

    def encrypt(data, recipients, armored=False):
        out = io.BytesIO()
        w = Writer(out, recipients, bugs)
        w.write(data)
        w.close()
        return out.getvalue()

    def encrypt_io(reader, writer, recipients, armored=False):
        w = Writer(writer, recipients, bugs)
        while piece := reader.read(1 << 16):
            w.write(piece)
        w.close()

    return Adapter(
        name="broken:" + ",".join(bugs),
        encrypt=encrypt,
        decrypt=lambda data, ids: Reader(io.BytesIO(data), ids, bugs).read(),
        encrypt_io=encrypt_io,
        decrypt_io=lambda r, w, ids: _copy(Reader(r, ids, bugs), w),
        encryptor=lambda dst, rs, armored=False: Writer(dst, rs, bugs),
        decryptor=lambda src, ids: Reader(src, ids, bugs),
        identity=lambda spec: spec,
        recipient=lambda spec: spec.public,
        classify=classify,
    )
