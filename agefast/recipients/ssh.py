"""The ssh-ed25519 and ssh-rsa recipient types: age to existing SSH keys.

These exist for compatibility with keys people already have; native X25519
keys should be preferred. Each stanza starts with a tag, the first four bytes
of the SHA-256 of the SSH wire-format public key, so an identity can skip
stanzas meant for other keys without trying them.

An ssh-ed25519 key is used for X25519 by mapping the Edwards point to its
Montgomery form. The shared secret is then "tweaked" by a scalar derived from
the SSH public key, binding the wrap to that key rather than to any Ed25519
key with the same Montgomery form.
"""

import base64
import hashlib
import hmac
import re
import struct
from collections.abc import Callable
from typing import Any, NoReturn

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from .. import _arguments
from ..errors import (EncryptError, HeaderError, IdentityError, PassphraseNeededError, RecipientError,
                     UnsupportedKeyError)
from .._typing import Buffer
from ..format.grammar import GO_SPACE, Stanza, b64decode, b64encode
from ..primitives import FILE_KEY_SIZE, hkdf, passphrase_bytes, unwrap_file_key, wrap_file_key
from . import x25519

ED25519_TYPE = "ssh-ed25519"
RSA_TYPE = "ssh-rsa"
_ED25519_LABEL = b"age-encryption.org/v1/ssh-ed25519"
_RSA_LABEL = b"age-encryption.org/v1/ssh-rsa"
# Below 2048 bits RSA is breakable; far above 16384 bits a key only makes
# every wrap and unwrap slow, which a hostile recipients file could exploit.
MIN_RSA_BITS = 2048
MAX_RSA_BITS = 16384
_P = 2**255 - 19
_D = -121665 * pow(121666, -1, _P) % _P


def _wire(public_key: "ed25519.Ed25519PublicKey | rsa.RSAPublicKey") -> bytes:
    """The SSH wire encoding of a public key (the base64 field of authorized_keys)."""
    text = public_key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return base64.b64decode(text.split()[1])


def _tag(wire: bytes) -> str:
    return b64encode(hashlib.sha256(wire).digest()[:4])


def _montgomery(ed_public: bytes) -> bytes:
    """The X25519 (Montgomery u) form of an Ed25519 public key: u = (1 + y) / (1 - y)."""
    y = int.from_bytes(ed_public, "little") & ((1 << 255) - 1)
    if y % _P == 1:
        # The identity point: it has no Montgomery form.
        raise ValueError("the Ed25519 public key is the identity point")
    # As edwards25519's SetBytes (age's check): y must be the y of a point on the curve, x^2 = (y^2 - 1) / (d y^2 + 1)
    # a square; no private key matches any other, and a file encrypted to it could never be opened.
    x2 = (y * y - 1) * pow(_D * y * y + 1, -1, _P) % _P
    if x2 and pow(x2, (_P - 1) // 2, _P) != 1:
        raise ValueError("edwards25519: invalid point encoding")
    u = (1 + y) * pow(1 - y, -1, _P) % _P
    return u.to_bytes(32, "little")


def _low_order(error: type[Exception]) -> Exception:
    return error("ssh-ed25519 key or share is a low-order point")


def _x25519(key: X25519PrivateKey, point: bytes, error: type[Exception]) -> bytes:
    try:
        return key.exchange(x25519._public_key(point))
    except ValueError:
        # OpenSSL refuses the all-zero result of a low-order point.
        raise _low_order(error) from None


# Keys are made once per SSH key and kept: OpenSSL computes the public key of
# every private key it imports, so a scalar imported for each use cost a
# multiplication more each time, two of an encryption's five and two of a
# decryption's four.
def _tweak(wire: bytes) -> X25519PrivateKey:
    """The key of the scalar that binds the shared secret to the SSH key."""
    return x25519._private_key(hkdf(b"", wire, _ED25519_LABEL))


# Go's base64.StdEncoding, which age's SSH parsers decode with: whole quanta, a short last one padded.
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_FIELD_END = re.compile(r"[ \t]")


def _blob(text: str) -> bytes | None:
    return base64.b64decode(text) if _BASE64.fullmatch(text) else None


def key_type(line: str) -> str | None:
    """The type of an authorized_keys-style line `TYPE BASE64 ...`, if it is one.

    As age checks it (sshKeyType): fields split at single spaces, the type
    named in the line the one inside the base64 key blob.
    """
    fields = line.split(" ")
    blob = _blob(fields[1]) if len(fields) >= 2 else None
    if blob is None or len(blob) < 4:
        return None
    (size,) = struct.unpack_from(">I", blob)
    if len(blob) < 4 + size:      # Go's cryptobyte ReadBytes wants all of them
        return None
    return fields[0] if blob[4:4 + size] == fields[0].encode("ascii", "replace") else None


def _key_fields(line: str) -> tuple[str, str] | None:
    """The type and base64 fields of an authorized_keys line, found as Go's ssh.ParseAuthorizedKey finds
    them: fields end at a space or a tab, and the key's starts after any of Go's spaces."""
    line = line.split("\n", 1)[0].split("\r", 1)[0]     # where Go's ParseAuthorizedKey ends a line
    parts = _FIELD_END.split(line.strip(GO_SPACE), 1)
    if len(parts) < 2:
        return None
    return parts[0], _FIELD_END.split(parts[1].strip(GO_SPACE), 1)[0]


def _check_rsa_size(key: rsa.RSAPublicKey | rsa.RSAPrivateKey, error: type[Exception]) -> None:
    bits = key.key_size
    # As age, which counts the modulus's bytes (rsa.PublicKey.Size): a key of 2041 to 2047 bits is one.
    if (bits + 7) // 8 < MIN_RSA_BITS // 8:
        raise error(f"ssh-rsa key is {bits} bits; age requires a modulus of at least {MIN_RSA_BITS // 8} bytes "
                    f"({MIN_RSA_BITS} bits)")
    if bits > MAX_RSA_BITS:
        raise error(f"ssh-rsa key is {bits} bits; at most {MAX_RSA_BITS} are supported")


def _check_rsa_numbers(key: rsa.RSAPublicKey) -> None:
    # As Go's ssh.ParsePublicKey, which age reads an ssh-rsa key with: an exponent of at most 24 bits (an even
    # one, or one under 3, cryptography refuses). And an odd modulus, the only kind OpenSSL encrypts to: age
    # would write a file for an even one (no RSA key has one).
    numbers = key.public_numbers()
    if numbers.e.bit_length() > 24:
        raise RecipientError("invalid ssh-rsa public key: its exponent is longer than 24 bits")
    if not numbers.n & 1:
        raise RecipientError("invalid ssh-rsa public key: its modulus is even")


def _oaep() -> padding.OAEP:
    return padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=_RSA_LABEL)


class Recipient:
    """An SSH public key, as in authorized_keys: `ssh-ed25519 AAAA... comment`."""

    labels: frozenset[str] = frozenset()

    def __init__(self, public_key: ed25519.Ed25519PublicKey | rsa.RSAPublicKey) -> None:
        if isinstance(public_key, ed25519.Ed25519PublicKey):
            self.type = ED25519_TYPE
            try:
                self._x25519 = _montgomery(public_key.public_bytes_raw())
            except ValueError as e:
                raise RecipientError(f"invalid ssh-ed25519 public key: {e}") from None
            # The ephemeral share and its secret are an X25519 wrap's, to the Montgomery form.
            self._as_x25519 = x25519.Recipient(self._x25519)
            self._tweak_key: X25519PrivateKey | None = None
        elif isinstance(public_key, rsa.RSAPublicKey):
            self.type = RSA_TYPE
            _check_rsa_size(public_key, RecipientError)
            _check_rsa_numbers(public_key)
        else:
            raise RecipientError(f"unsupported SSH key type: {type(public_key).__name__}")
        self._key: ed25519.Ed25519PublicKey | rsa.RSAPublicKey = public_key
        self._wire = _wire(public_key)

    @classmethod
    def from_str(cls, v: str) -> "Recipient":
        """An authorized_keys line. A malformed one is "invalid SSH
        recipient", as pyrage says, a well-formed one of a type age cannot
        use an UnsupportedKeyError."""
        fields = _key_fields(_arguments.text("v", v))
        if fields is None:
            raise RecipientError("invalid SSH recipient: malformed SSH public key: expected `TYPE BASE64 [COMMENT]`")
        if fields[0] not in (ED25519_TYPE, RSA_TYPE):
            if key_type(v) is not None:
                raise UnsupportedKeyError(f"unsupported SSH key type: {fields[0][:32]!r}")
            # Not the type itself: a recipients file's line may be a secret pasted there (age hides it too).
            raise RecipientError("invalid SSH recipient: unknown SSH key type")
        if _blob(fields[1]) is None:
            raise RecipientError("invalid SSH recipient: malformed SSH public key: the key is not base64")
        try:
            key = serialization.load_ssh_public_key(" ".join(fields).encode("ascii"))
        except (ValueError, UnsupportedAlgorithm, UnicodeEncodeError) as e:
            raise RecipientError(f"invalid SSH recipient: malformed SSH public key: {e}") from None
        return cls(key)  # type: ignore[arg-type]  # an ssh-ed25519 or ssh-rsa key, by its type field

    def __str__(self) -> str:
        return f"{self.type} {base64.b64encode(self._wire).decode('ascii')}"

    def __repr__(self) -> str:
        return f"<ssh.Recipient {self.type} {_tag(self._wire)}>"

    def __reduce__(self) -> tuple[Callable[[str], "Recipient"], tuple[str]]:
        # Pickled as its authorized_keys line (cryptography's key objects do not pickle), for a tree job's workers.
        return Recipient.from_str, (str(self),)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Recipient) and other._wire == self._wire

    def __hash__(self) -> int:
        return hash(self._wire)

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """One stanza of this key's type (ssh-ed25519 or ssh-rsa), tagged with the key's tag."""
        tag = _tag(self._wire)
        if isinstance(self._key, rsa.RSAPublicKey):
            return [Stanza(RSA_TYPE, [tag], self._key.encrypt(file_key, _oaep()))]
        if self._tweak_key is None:
            self._tweak_key = _tweak(self._wire)
        try:
            share, secret = self._as_x25519._share_and_secret()
        except EncryptError:
            raise _low_order(EncryptError) from None
        secret = _x25519(self._tweak_key, secret, EncryptError)
        wrap_key = hkdf(secret, share + self._x25519, _ED25519_LABEL)
        return [Stanza(ED25519_TYPE, [tag, b64encode(share)], wrap_file_key(wrap_key, file_key))]


def _load_private_key(data: bytes, passphrase: bytes | None) -> Any:
    """Load an OpenSSH or PEM private key; IdentityError for anything unusable."""
    loader: Callable[..., Any] = serialization.load_ssh_private_key
    if not data.lstrip().startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----"):
        loader = serialization.load_pem_private_key
    try:
        # OpenSSL's checks of an RSA key prove its primes prime: 32 s for a 16384-bit key, which Go age loads
        # in 0.4 s (checking what is cheap). The key is the user's own, read from their identity file; a
        # damaged one opens no file (OAEP fails), as any wrong key.
        return loader(data, passphrase, unsafe_skip_rsa_key_validation=True)
    except TypeError:
        # cryptography says TypeError for "encrypted but no password given"
        # and for "password given but not encrypted".
        if passphrase is None:
            raise PassphraseNeededError("the SSH key is passphrase-protected: a passphrase is needed") from None
        return _load_private_key(data, None)     # not protected: loaded (or refused) as without a passphrase
    except (ValueError, UnsupportedAlgorithm) as e:
        if passphrase is not None:
            # Both loaders report a wrong passphrase as corrupt data.
            raise IdentityError("cannot open the SSH key: wrong passphrase, or a corrupt key") from None
        if loader is serialization.load_pem_private_key:
            raise IdentityError("invalid SSH identity: malformed SSH private key: not an OpenSSH or PEM private key") from None
        raise IdentityError(f"invalid SSH identity: malformed SSH private key: {e}") from None


class Identity:
    """An ssh-ed25519 or ssh-rsa private key (OpenSSH or PEM format)."""

    def __init__(self, private_key: ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey) -> None:
        if isinstance(private_key, ed25519.Ed25519PrivateKey):
            self.type = ED25519_TYPE
            scalar = hashlib.sha512(private_key.private_bytes_raw()).digest()[:32]
            self._scalar = x25519._private_key(scalar)
            self._x25519 = self._scalar.public_key().public_bytes_raw()
            self._tweak_key: X25519PrivateKey | None = None
        elif isinstance(private_key, rsa.RSAPrivateKey):
            self.type = RSA_TYPE
            _check_rsa_size(private_key, IdentityError)
        else:
            raise IdentityError(f"unsupported SSH key type: {type(private_key).__name__}")
        self._key: ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey = private_key
        self._wire = _wire(private_key.public_key())

    @classmethod
    def from_buffer(cls, buf: Buffer, passphrase: str | bytes | None = None) -> "Identity":
        """Load a private key file's contents (bytes); `passphrase` opens a protected key."""
        key = None if passphrase is None else passphrase_bytes(passphrase)
        return cls(_load_private_key(bytes(_arguments.buffer("buf", buf)), key))

    def __repr__(self) -> str:
        return f"<ssh.Identity {self.type} {_tag(self._wire)}>"

    def __reduce__(self) -> tuple[Callable[[bytes], "Identity"], tuple[bytes]]:
        # Pickled as an unencrypted OpenSSH private key (cryptography's key objects do not pickle), for a tree
        # job's workers: the pickle is as secret as the key.
        data = self._key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption())
        return Identity.from_buffer, (data,)

    def to_public(self) -> Recipient:
        """The recipient (the SSH public key) that files for this identity are encrypted to."""
        return Recipient(self._key.public_key())

    def unwrap(self, stanzas: list[Stanza]) -> bytes | None:
        """The file key from the first stanza carrying this key's tag, or None if none does.

        A stanza with this key's tag that does not open (or is malformed) raises HeaderError."""
        tag = _tag(self._wire)
        for s in stanzas:
            if s.type != self.type:
                continue
            if s.type == RSA_TYPE:
                file_key = self._unwrap_rsa(s, tag)
            else:
                file_key = self._unwrap_ed25519(s, tag)
            if file_key is not None:
                return file_key
        return None

    def _unwrap_rsa(self, s: Stanza, tag: str) -> bytes | None:
        if len(s.args) != 1:
            raise HeaderError("invalid ssh-rsa stanza: wrong number of arguments")
        if not hmac.compare_digest(s.args[0], tag) or not isinstance(self._key, rsa.RSAPrivateKey):
            return None
        try:
            return self._key.decrypt(s.body, _oaep())
        except ValueError:
            # The tag says this stanza is ours, so as in age this is fatal.
            raise HeaderError("ssh-rsa stanza for this key does not decrypt") from None

    def _unwrap_ed25519(self, s: Stanza, tag: str) -> bytes | None:
        if len(s.args) != 2:
            raise HeaderError("invalid ssh-ed25519 stanza: wrong number of arguments")
        try:
            share = b64decode(s.args[1])
        except ValueError:
            raise HeaderError("invalid ssh-ed25519 stanza: malformed share") from None
        if len(share) != 32:
            raise HeaderError("invalid ssh-ed25519 stanza: share is not 32 bytes")
        if not hmac.compare_digest(s.args[0], tag):
            return None
        if len(s.body) != FILE_KEY_SIZE + 16:
            raise HeaderError("invalid ssh-ed25519 stanza: body is not 32 bytes")
        if self._tweak_key is None:
            self._tweak_key = _tweak(self._wire)
        secret = _x25519(self._tweak_key, _x25519(self._scalar, share, HeaderError), HeaderError)
        file_key = unwrap_file_key(hkdf(secret, share + self._x25519, _ED25519_LABEL), s.body)
        if file_key is None:
            raise HeaderError("ssh-ed25519 stanza for this key does not decrypt")
        return file_key


def openssh_public_key(data: bytes) -> Recipient | None:
    """The public key stored in clear inside an OpenSSH private key file.

    The openssh-key-v1 container keeps the public key unencrypted, which lets
    an encrypted key match stanzas before its passphrase is asked for. None
    for other formats (PEM keys need their ".pub" file instead).
    """
    text = data.strip()
    begin, end = b"-----BEGIN OPENSSH PRIVATE KEY-----", b"-----END OPENSSH PRIVATE KEY-----"
    if not (text.startswith(begin) and text.endswith(end)):
        return None
    try:
        blob = base64.b64decode(b"".join(text[len(begin):-len(end)].split()), validate=True)
        magic = b"openssh-key-v1\0"
        if not blob.startswith(magic):
            return None
        offset = len(magic)
        for _ in range(3):  # cipher name, KDF name, KDF options
            (size,) = struct.unpack_from(">I", blob, offset)
            offset += 4 + size
        (count,) = struct.unpack_from(">I", blob, offset)
        (size,) = struct.unpack_from(">I", blob, offset + 4)
        wire = blob[offset + 8:offset + 8 + size]
        if count != 1 or len(wire) != size:
            return None
        (type_size,) = struct.unpack_from(">I", wire, 0)
        fields = [wire[4:4 + type_size].decode("ascii"), base64.b64encode(wire).decode("ascii")]
    except (ValueError, struct.error, UnicodeDecodeError):
        return None
    return Recipient.from_str(" ".join(fields))


class EncryptedIdentity:
    """A passphrase-protected SSH key that asks for its passphrase only when needed.

    Like age, the passphrase is requested (through `passphrase()`, which returns
    it) only once a stanza carries this key's tag, so decrypting a file meant
    for another key never prompts. The decrypted key is kept for later files.
    """

    def __init__(self, data: bytes, public_key: Recipient, passphrase: Callable[[], str | bytes]) -> None:
        self._data = bytes(data)
        self._public = public_key
        self._passphrase = passphrase
        self._identity: Identity | None = None

    def __repr__(self) -> str:
        return f"<ssh.EncryptedIdentity {self._public.type} {_tag(self._public._wire)}>"

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        # Once used it holds the key decrypted, whose pickle is its unencrypted PEM (Identity.__reduce__): a
        # pickle or copy would carry the key without its passphrase, or the callback that asks for it.
        raise TypeError("cannot pickle or copy 'EncryptedIdentity' object: a passphrase-protected SSH key stays in "
                        "its process")

    def to_public(self) -> Recipient:
        """The recipient (the SSH public key, read in clear from the key file)."""
        return self._public

    def unwrap(self, stanzas: list[Stanza]) -> bytes | None:
        """As Identity.unwrap; asks for the passphrase (once) only when a stanza carries this key's tag."""
        if self._identity is None:
            tag = _tag(self._public._wire)
            for s in stanzas:
                if s.type != self._public.type:
                    continue
                if not s.args:
                    # As age's EncryptedSSHIdentity: a stanza of this key's type before the first with its tag,
                    # without the tag argument, is malformed (not "no match").
                    raise HeaderError(f"invalid {s.type} stanza: wrong number of arguments")
                if hmac.compare_digest(s.args[0], tag):
                    break
            else:
                return None
        return self.unlocked().unwrap(stanzas)

    def unlocked(self) -> Identity:
        """The key decrypted, its passphrase asked for now if it was not yet (agefast.tree asks once, before its
        workers start, rather than in each)."""
        if self._identity is None:
            identity = Identity.from_buffer(self._data, self._passphrase())
            if identity._wire != self._public._wire:
                raise IdentityError("mismatched private and public SSH key")
            self._identity = identity
        return self._identity
