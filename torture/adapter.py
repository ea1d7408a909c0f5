"""The implementation under test, behind one small interface.

Everything torture does to an implementation goes through an Adapter, so a
deliberately broken implementation can be run through the same machinery as
agefast and must be caught by it.
"""

from dataclasses import dataclass
from typing import Callable

from .reference import ARMOR, HEADER, MAC, NO_MATCH, PAYLOAD


@dataclass
class Adapter:
    name: str
    # One-shot and streaming entry points, with agefast's signatures.
    encrypt: Callable            # (data, recipients, armored) -> bytes
    decrypt: Callable            # (ciphertext, identities) -> bytes
    encrypt_io: Callable         # (reader, writer, recipients, armored)
    decrypt_io: Callable         # (reader, writer, identities)
    encryptor: Callable          # (dst, recipients, armored) -> writable, close() seals
    decryptor: Callable          # (src, identities) -> readable with read/readinto
    identity: Callable           # KeySpec -> identity object
    recipient: Callable          # KeySpec -> recipient object
    classify: Callable           # exception -> outcome kind, or None if not a typed decrypt error
    kinds: frozenset = frozenset({"x25519"})  # KeySpec kinds it supports
    armor: bool = False


def agefast_adapter() -> Adapter:
    import agefast
    from agefast import errors

    kinds = ((errors.HeaderMACError, MAC), (errors.NoIdentityMatchError, NO_MATCH), (errors.PayloadError, PAYLOAD),
             (errors.ArmorError, ARMOR), (errors.HeaderError, HEADER))

    def classify(exc: BaseException) -> str | None:
        return next((kind for cls, kind in kinds if isinstance(exc, cls)), None)

    def identity(spec):
        if spec.kind == "x25519":
            return agefast.x25519.Identity(spec.secret)
        if spec.kind == "passphrase":
            return agefast.passphrase.Identity(spec.secret, max_work_factor=22)
        return agefast.pq.Identity(spec.secret)

    def recipient(spec):
        if spec.kind == "passphrase":
            return agefast.passphrase.Recipient(spec.secret, work_factor=spec.work_factor)
        return identity(spec).to_public()

    return Adapter(
        name="agefast",
        encrypt=lambda data, rs, armored=False: agefast.encrypt(data, rs, armored),
        decrypt=agefast.decrypt,
        encrypt_io=lambda r, w, rs, armored=False: agefast.encrypt_io(r, w, rs, armored),
        decrypt_io=agefast.decrypt_io,
        encryptor=lambda dst, rs, armored=False: agefast.encryptor(dst, rs, armored=armored),
        decryptor=agefast.decryptor,
        identity=identity,
        recipient=recipient,
        classify=classify,
        kinds=frozenset({"x25519", "passphrase", "pq"}),
        armor=True,
    )
