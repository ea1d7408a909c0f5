"""Typed errors, one class per age outcome.

The top-level names (EncryptError, DecryptError, IdentityError, RecipientError)
are pyrage's, so code written against pyrage catches the same things. Every
decryption outcome is a DecryptError subclass, so callers that only care that
decryption failed can catch one class.
"""

from collections.abc import Iterable


class AgeError(Exception):
    """Base class of every error agefast raises on purpose."""


class EncryptError(AgeError):
    """Encryption failed (bad recipient set, I/O on a closed stream, ...)."""


class DecryptError(AgeError):
    """Decryption failed; the subclass says which of age's outcomes it was."""


class HeaderError(DecryptError):
    """The header does not parse, or a stanza addressed to us is malformed."""


class HeaderMACError(DecryptError):
    """A file key was unwrapped, but the header MAC does not match."""


class NoIdentityMatchError(DecryptError):
    """The header parsed, but no identity could unwrap any stanza.

    `stanza_types` is the type of each stanza in the header, in order, as in
    age 1.3's NoIdentityMatchError.StanzaTypes: it says what the file was
    encrypted to (X25519, scrypt, a plugin, ...) without any key.
    """

    def __init__(self, message: str, stanza_types: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.stanza_types = list(stanza_types)


class PayloadError(DecryptError):
    """The STREAM payload is corrupt, truncated, or has trailing data."""


class TruncatedError(PayloadError):
    """The file ends before its payload does: it was cut short (a copy or a
    download that stopped early), and whatever chunks it still holds verified.

    Raised where the bytes themselves prove it: the file ends with no chunk,
    inside the 16-byte tag of a chunk, or after a whole chunk that verified
    as a middle one, or it shrank while it was read. A file cut in the middle
    of its last chunk cannot be told from one whose final chunk is damaged
    (the tag that would tell is gone), so that is a PayloadError, as in age,
    whose message says both. A file cut inside its header or before the
    payload nonce is a HeaderError, age's outcome for it, saying the file is
    truncated.
    """


class ArmorError(DecryptError):
    """The ASCII armor is not strict, canonical PEM."""


class IdentityError(AgeError, ValueError):
    """An identity string or file is malformed."""


class RecipientError(AgeError, ValueError):
    """A recipient string or file is malformed."""


class UnsupportedKeyError(RecipientError):
    """A well-formed SSH public key of a type age cannot encrypt to (ecdsa, dsa, ...)."""


class PassphraseNeededError(IdentityError):
    """The SSH private key is passphrase-protected and no passphrase was given."""


class SameFileError(AgeError, ValueError):
    """The input and the output are one file: writing would destroy the input."""


class EngineError(AgeError):
    """The payload engine a setting asks for cannot be had: AGEFAST_ENGINE names
    no engine, or the kernels where this install has none to load."""


def go_quote(text: str | bytes) -> str:
    """`text` in double quotes with escapes, as Go's %q prints a name in age's messages and prompts: bytes that
    are not UTF-8 (in bytes, or standing as surrogates in a str, as os.fsdecode leaves them) as \\xHH."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() else _go_escape(c) for c in escaped) + '"'


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _go_escape(c: str) -> str:
    """A character Go's strconv.Quote escapes, as it escapes it: a byte as \\xHH (below 0x80, or one that was
    not UTF-8, standing as a surrogate), any other character as \\uHHHH or \\UHHHHHHHH."""
    code = ord(c)
    if c in _GO_ESCAPES:
        return _GO_ESCAPES[c]
    if code < 0x80:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def again(error: BaseException) -> BaseException:
    """`error`, stored by a reader that failed, to raise once more: every
    read after a failure raises the first error again (`raise again(e)`).

    Its traceback is dropped first: each raise would add the frames of
    that read to the ones before and keep them all, with their buffers,
    as long as the reader keeps its error (2000 failed reads of a stream:
    132 MB).
    """
    return error.with_traceback(None)
