"""Identity files and recipients files: one key per line, `#` comments.

Recipients files may also hold SSH public keys in authorized_keys form. An
identity file may instead be a whole SSH private key, or an age file
encrypted with a passphrase whose plaintext is an identity file; see
`load_identities`.
"""

import importlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias, Union

from . import _arguments, api
from .recipients import x25519
from .errors import (DecryptError, EncryptError, IdentityError, NoIdentityMatchError, PassphraseNeededError,
                     RecipientError, UnsupportedKeyError, go_quote)
from .format.grammar import Stanza

if TYPE_CHECKING:
    from .recipients import plugin, pq, ssh, tag, tagpq

# What the parsers return: the key types a key string can name.
ParsedIdentity: TypeAlias = "x25519.Identity | pq.Identity | plugin.IdentityPluginV1"
ParsedRecipient: TypeAlias = ("x25519.Recipient | pq.Recipient | tag.Recipient | tagpq.Recipient | ssh.Recipient"
                              " | plugin.RecipientPluginV1")
# What an identity file can hold besides: SSH keys and passphrase-encrypted files.
LoadedIdentity: TypeAlias = ("x25519.Identity | pq.Identity | plugin.IdentityPluginV1 | ssh.Identity"
                             " | ssh.EncryptedIdentity | EncryptedIdentityFile")


def key_text(data: bytes) -> str:
    """A key file's text. As Go age reads one, only its keys must be valid (ASCII, and checked as keys): a comment
    may hold anything, Latin-1 included. Bytes that are not UTF-8 become U+FFFD, which no key holds."""
    return data.decode("utf-8", "replace")


# Key files are read whole, up to this much (as Go age reads their lines): -i /dev/zero, a FIFO that never ends
# or a huge file is an error at once, not all of the machine's memory.
MAX_KEY_FILE = 16 << 20


def read_key_file(f: Any, name: str, error: type[Exception]) -> bytes:
    """All of the key file open as `f`, up to MAX_KEY_FILE; `error` naming it `name` where it holds more."""
    data: bytes = f.read(MAX_KEY_FILE + 1)
    if len(data) > MAX_KEY_FILE:
        raise error(f"{name}: larger than {MAX_KEY_FILE >> 20} MiB, which no key file is")
    return data


# Bech32 prefixes, upper-case for identities and lower-case for recipients,
# as they appear in files, with the module of their type; the longer prefix
# must be tried first. Modules other than x25519 are imported when a key of
# theirs is met: together they cost a command ~25 ms of start-up.
_IDENTITY_TYPES = (("AGE-SECRET-KEY-PQ-1", "pq"), ("AGE-SECRET-KEY-1", "x25519"))
_RECIPIENT_TYPES = (("age1pq1", "pq"), ("age1tagpq1", "tagpq"), ("age1tag1", "tag"))


def _module(name: str) -> ModuleType:
    return importlib.import_module(f".recipients.{name}", __package__)


# The longest line Go age's bufio.Scanner takes in a key file (its MaxScanTokenSize, 64 KiB, with the "\n"), and
# the longest recipient line age's recipients files take (8 KiB, as sshd's authorized_keys), in UTF-8 bytes: a
# key file of one 16 MiB line took ~7 s and ~370 MB to be refused as a bad Bech32 checksum.
_LONGEST_LINE = (64 << 10) - 1
_LONGEST_RECIPIENT = 8 << 10


def _size(line: str) -> int:
    """The bytes of `line` in its file, near enough: a U+FFFD, which key_text puts for each byte (or cut-short
    sequence) that is not UTF-8, counts as one."""
    if line.isascii():
        return len(line)
    return len(line.encode("utf-8", "surrogatepass")) - 2 * line.count("\ufffd")


def _lines(text: str, error: type[Exception], longest: int = _LONGEST_LINE) -> Iterator[tuple[int, str]]:
    """The numbered key lines of a key file, as Go age scans one (bufio.ScanLines): a line ends at "\n" alone,
    less one "\r" before it, and is taken as it is. str.splitlines() also ends lines at "\r", "\f", U+2028 and
    more: a key after one of them inside a comment was a recipient that age, and a reader of the file, did not
    see. So a comment is a line whose first character is "#", and a key with spaces around it is malformed.
    `error` for a line longer than age's scanner takes, or a key line longer than `longest`."""
    for number, line in enumerate(text.split("\n"), 1):
        size = _size(line)
        if size > _LONGEST_LINE:
            raise error(f"line {number} is too long")
        if line.endswith("\r"):
            line, size = line[:-1], size - 1
        if line and not line.startswith("#"):
            if size > longest:
                raise error(f"line {number} is too long")
            yield number, line


def parse_identity(s: str, callbacks: object = None, *, plugins: bool = True) -> ParsedIdentity:
    """One identity string; plugin identities talk to the user through `callbacks`, or are of an unknown type
    where not `plugins` (as Go's age.ParseIdentities has them: age-keygen -y runs no plugin)."""
    for prefix, module in _IDENTITY_TYPES:
        if s.startswith(prefix):
            identity: ParsedIdentity = _module(module).Identity.from_str(s)
            return identity
    if plugins and s.startswith("AGE-PLUGIN-"):
        plugin = _module("plugin")
        key = plugin.Identity.from_str(s)
        try:
            # The plugin is looked for when the identity is tried, as age looks for it: a file that also holds
            # a native key that opens the file needs no plugin installed.
            identity = plugin.IdentityPluginV1.found_when_used(key.plugin(), [key], callbacks)
            return identity
        except DecryptError as e:
            raise IdentityError(str(e)) from None
    raise IdentityError("unknown identity type")


def parse_recipient(s: str, callbacks: object = None) -> ParsedRecipient:
    """One recipient string (Bech32, or an SSH public key line)."""
    recipient: ParsedRecipient
    if not s.startswith("age1"):
        ssh_keys = _module("ssh")
        if s.startswith("ssh-") or ssh_keys.key_type(s) is not None:
            recipient = ssh_keys.Recipient.from_str(s)
            return recipient
        raise RecipientError("unknown recipient type")
    for prefix, module in _RECIPIENT_TYPES:
        if s.startswith(prefix):
            recipient = _module(module).Recipient.from_str(s)
            return recipient
    # A native X25519 recipient has a single "1", the Bech32 separator
    # (the data alphabet has no "1"); age1NAME1... is a plugin's.
    if s.count("1") > 1:
        plugins = _module("plugin")
        key = plugins.Recipient.from_str(s)
        try:
            recipient = plugins.RecipientPluginV1(key.plugin(), [key], [], callbacks)
            return recipient
        except EncryptError as e:
            raise RecipientError(str(e)) from None
    return x25519.Recipient.from_str(s)


def parse_identities(text: str, callbacks: object = None, *, plugins: bool = True) -> list[ParsedIdentity]:
    """Parse identity-file text: one identity per line, `#` comments; plugin identities only where `plugins`."""
    out = []
    for number, line in _lines(_arguments.text("text", text), IdentityError):
        try:
            out.append(parse_identity(line, callbacks, plugins=plugins))
        except IdentityError as e:
            # Never echo the line itself: it may be a secret key.
            if line.startswith("age1"):
                e = IdentityError("apparent recipient found in identities file")     # age 1.3's hint
            raise IdentityError(f"malformed identity on line {number}: {e}") from None
    if not out:
        raise IdentityError("no identities found")
    return out


def parse_recipients(text: str, callbacks: object = None, *,
                     warn: Callable[[str], object] | None = None) -> list[ParsedRecipient]:
    """Parse recipients-file text: one recipient per line, `#` comments.

    An SSH key agefast cannot use (of a type age does not support, ecdsa,
    ...; an ssh-rsa key under 2048 bits) is an error; if `warn` is given it
    is called with a message instead and the line skipped, as age skips any
    well-formed SSH key line it cannot parse (its type the one inside its
    key), so authorized_keys files with other keys stay usable.
    """
    out = []
    for number, line in _lines(_arguments.text("text", text), RecipientError, _LONGEST_RECIPIENT):
        try:
            out.append(parse_recipient(line, callbacks))
        except RecipientError as e:
            if warn is not None and (isinstance(e, UnsupportedKeyError) or _module("ssh").key_type(line)):
                warn(f"ignoring line {number}: {e}")
                continue
            if line.startswith("AGE-"):
                e = RecipientError("apparent identity found in recipients file")     # age 1.3's hint
            # an UnsupportedKeyError stays one, with its line, as the caller may skip such keys itself
            raise type(e)(f"malformed recipient on line {number}: {e}") from None
    if not out:
        raise RecipientError("no recipients found")
    return out


class _AskedPassphrase:
    """The passphrase of an encrypted identity file, asked for only where the file's one stanza is scrypt's (as
    age's LazyScryptIdentity): a file encrypted to a key asks for nothing."""

    def __init__(self, ask: Callable[[], str]) -> None:
        self._ask = ask

    def unwrap(self, stanzas: list[Stanza]) -> bytes | None:
        scrypt = _module("scrypt")
        scrypt.check_alone(stanzas)
        if len(stanzas) != 1 or stanzas[0].type != scrypt.STANZA_TYPE:
            return None
        file_key: bytes | None = scrypt.asked_identity(self._ask()).unwrap(stanzas)
        if file_key is None:
            raise DecryptError("incorrect passphrase")     # age's words: the file has one passphrase, and not this
        return file_key


class EncryptedIdentityFile:
    """An identity file encrypted to a passphrase, opened at first use.

    As in age, the passphrase is asked for (through `passphrase(prompt)`)
    the first time a file is decrypted with it, not when it is loaded; and
    where none of its identities opens a file, `warn(message)` says so.
    """

    def __init__(self, data: bytes, name: str, passphrase: Callable[[str], str] | None,
                 callbacks: object = None, warn: Callable[[str], object] | None = None) -> None:
        self._data = bytes(data)
        self._name = name
        self._passphrase = passphrase
        self._callbacks = callbacks
        self._warn = warn
        self._identities: list[ParsedIdentity] | None = None

    def __repr__(self) -> str:
        return f"<keys.EncryptedIdentityFile {self._name!r}>"

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        # Once used it holds the identities decrypted: a pickle or copy would carry them without the passphrase.
        raise TypeError("cannot pickle or copy 'EncryptedIdentityFile' object: a passphrase-encrypted identity "
                        "file stays in its process")

    def _ask(self) -> str:
        if self._passphrase is None:
            raise IdentityError(f"identity file {self._name} is passphrase-encrypted: a passphrase is needed")
        return self._passphrase(f"Enter passphrase for identity file {go_quote(self._name)}:")

    def identities(self) -> list[ParsedIdentity]:
        """The identities in the file, decrypted (asking for the passphrase) the first time."""
        if self._identities is None:
            try:
                text = api.decrypt(self._data, [_AskedPassphrase(self._ask)])
            except NoIdentityMatchError:
                raise IdentityError(
                    f"identity file {self._name} is encrypted with age but not with a passphrase") from None
            except DecryptError as e:
                raise IdentityError(f"identity file {self._name}: cannot decrypt it: {e}") from None
            self._identities = parse_identities(key_text(text), self._callbacks)
        return self._identities

    def recipients(self) -> "list[x25519.Recipient | pq.Recipient | plugin.RecipientPluginV1]":
        """The recipients of the identities in the file."""
        return [identity.to_public() for identity in self.identities()]

    def unwrap(self, stanzas: list[Stanza]) -> bytes | None:
        """The file key from the first of the file's identities that unwraps one, or None."""
        for identity in self.identities():
            file_key = identity.unwrap(stanzas)
            if file_key is not None:
                return file_key
        if self._warn is not None:
            self._warn(f"encrypted identity file {go_quote(self._name)} didn't match file's recipients")
        return None


def _ssh_identity(data: bytes, name: str, passphrase: Callable[[str], str] | None,
                  public_key: "PublicKey") -> "ssh.Identity | ssh.EncryptedIdentity":
    ssh_keys = _module("ssh")
    try:
        identity: "ssh.Identity" = ssh_keys.Identity.from_buffer(data)
        return identity
    except PassphraseNeededError:
        try:
            public = ssh_keys.openssh_public_key(data) or (public_key() if callable(public_key) else public_key)
        except RecipientError as e:
            # The public key of an identity file: an identity's error (an ecdsa key, an RSA key under 2048 bits).
            raise IdentityError(f"SSH key {name}: {e}") from None
        if public is None:
            raise IdentityError(
                f"SSH key {name} is passphrase-protected and its public key is unknown: "
                + ('use a file whose ".pub" file exists' if name == "-" else f"provide {name}.pub")
                + ", or convert the key with ssh-keygen -p") from None
        if passphrase is None:
            raise
        encrypted: "ssh.EncryptedIdentity" = ssh_keys.EncryptedIdentity(
            data, public, lambda: passphrase(f"Enter passphrase for {go_quote(name)}:"))
        return encrypted


# An SSH key's public key where its file does not carry it: the key, or what gives it when it is needed.
PublicKey = Union["ssh.Recipient", Callable[[], "ssh.Recipient | None"], None]


def load_identities(data: bytes, *, name: str = "-", passphrase: Callable[[str], str] | None = None,
                    callbacks: object = None, ssh_public_key: PublicKey = None,
                    warn: Callable[[str], object] | None = None) -> list[LoadedIdentity]:
    """The identities in an identity file's bytes, in any of age's forms.

    - an age file (binary or armored) encrypted with a passphrase, holding
      an identity file: opened at first use with `passphrase(prompt) -> str`,
      and `warn(message)` called where none of its identities opens a file;
    - a PEM or OpenSSH private key (ssh-ed25519, ssh-rsa); a protected one
      asks `passphrase(prompt)` once a file has a stanza for it, and needs its
      public key, which OpenSSH files carry and `ssh_public_key` (an
      ssh.Recipient, from the ".pub" file, or a function that returns one,
      called only then, as age reads that file only then) gives for PEM ones;
    - text, one identity per line.

    `name` is how prompts and errors refer to the file.
    """
    data = bytes(data)
    if data.startswith((b"age-encryption.org/", b"-----BEGIN AGE ENCRYPTED FILE-----")):
        return [EncryptedIdentityFile(data, name, passphrase, callbacks, warn)]
    if data.startswith(b"-----BEGIN"):
        return [_ssh_identity(data, name, passphrase, ssh_public_key)]
    return list(parse_identities(key_text(data), callbacks))
