"""The command's key flags: -r, -R, -i, -j and -p made into recipients and identities.

agefast.keys (and cryptography with it) is imported where keys are loaded,
not with this module: a large file's payload is started before that
(agefast.cli.early_payload).
"""

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import agefast
from agefast import errors
from agefast._typing import Identity, Recipient
from agefast.cli import files
from agefast.cli.outcome import UsageError, print_warning
from agefast.errors import go_quote
from agefast.cli.terminal import PluginPrompts, print_to_terminal, read_passphrase
from agefast.format import bech32
from agefast.format.grammar import Stanza
from agefast.recipients import batchpass

if TYPE_CHECKING:
    from agefast import keys
    from agefast.cli import goflag
    from agefast.cli.arguments import Arguments

def define(f: "goflag.FlagSet") -> None:
    """The key flags -r, -R, -i and -j, as every command that takes keys spells them."""
    f.repeated("recipients", "r", "recipient")
    f.repeated("recipients_files", "R", "recipients-file")
    # -i and -j share one list, so that they are tried in the order given, after the native identities
    # (X25519, post-quantum, passphrase), which age 1.3 tries first whatever the order (agefast.header).
    f.repeated("identity_flags", "i", "identity", tag="i")
    f.repeated("identity_flags", "j", tag="j")


_PLUGIN_PROMPTS = PluginPrompts()
_PLUGINS_PAGE = "visit https://age-encryption.org/awesome#plugins for a list of available plugins"


def _read_bytes(path: str, purpose: str) -> bytes:
    """The file at `path` ("-": standard input), which is a `purpose` ("identity file")."""
    from agefast import keys     # its keys are parsed next

    if path == "-":
        return keys.read_key_file(sys.stdin.buffer, f"{purpose} {path}", UsageError)
    with files.named(purpose, path):
        f = open(path, "rb")
    with f, files.named(purpose, path, "read"):
        return keys.read_key_file(f, f"{purpose} {path}", UsageError)


def read_key_file(path: str, purpose: str) -> str:
    from agefast import keys     # its keys are parsed next

    return keys.key_text(_read_bytes(path, purpose))


def _refuse_if_not_found(e: Exception) -> None:
    """age's error and hints where `e` is a plugin's program not found on the PATH (parsing a plugin recipient,
    or trying a plugin identity, which is looked for only then); any other error (a typo on another line, a
    malformed plugin key) stays the error told."""
    from agefast.recipients.plugin import missing_plugin

    name = missing_plugin(e)
    if name is not None:
        raise UsageError(f"{go_quote(name)} plugin not found", f"you might want to install the {go_quote(name)} plugin",
                         _PLUGINS_PAGE)


def _ssh_public_key(path: str) -> "agefast.ssh.Recipient | None":
    """PATH.pub, which age reads for a protected SSH key in PEM form (no public key inside)."""
    public_path = path + ".pub"
    if path == "-" or not os.path.exists(public_path):
        return None
    try:
        return agefast.ssh.Recipient.from_str(read_key_file(public_path, "SSH public key file"))
    except agefast.RecipientError as e:
        raise agefast.IdentityError(f"{public_path}: {e}") from None


def _load_identity_file(path: str) -> "list[keys.LoadedIdentity]":
    """Every identity in the file at `path`, in any of the forms age accepts.

    Native identity files, SSH private keys, and identity files encrypted
    with a passphrase (asked for at first use) all work, as with age.
    """
    data = _read_bytes(path, "identity file")
    try:
        # PATH.pub is read only for a protected PEM key, as age reads it: beside any other key it may be
        # anything (age-keygen -y key > key.pub).
        return agefast.load_identities(data, name=path, passphrase=read_passphrase,
                                       callbacks=_PLUGIN_PROMPTS, ssh_public_key=lambda: _ssh_public_key(path),
                                       warn=print_warning)
    except agefast.IdentityError as e:
        # Messages about the file as a whole already name it; line errors don't.
        if path in str(e):
            raise
        raise agefast.IdentityError(f"identity file {path}: {e}") from None


def _plugin_identity(name: str) -> "batchpass.Identity | agefast.plugin.IdentityPluginV1":
    """The identity of -j NAME: a plugin that takes no identity data."""
    if name == batchpass.NAME:
        return batchpass.Identity()
    try:
        # age runs age-plugin-NAME as NAME is written (pyrage's default_for_plugin lower-cases it)
        default = agefast.plugin.Identity(name, b"")
    except agefast.IdentityError as e:
        raise UsageError(f"-j {name}: {e}") from None
    # Looked for when the identity is tried, as age's -j (plugin.NewIdentityWithoutData): with -i key.txt
    # before it, a file key.txt opens needs no plugin installed.
    return agefast.plugin.IdentityPluginV1.found_when_used(name, [default], _PLUGIN_PROMPTS)


def key_files(args: "Arguments") -> list[str]:
    """The files the key flags read, which no output may replace: the -i files and an SSH identity's PATH.pub
    (read for keys that don't hold their public key), the -R files, and with -j batchpass the file behind
    $AGE_PASSPHRASE_FD."""
    # PATH.pub only where it exists, as it is read only then: -d -i key -o key.pub restores a deleted one.
    public_files = [f"{path}.pub" for path in args.identities if path != "-" and os.path.exists(f"{path}.pub")]
    files = [*args.identities, *public_files, *args.recipients_files]
    passphrase = batchpass.passphrase_file() if ("j", batchpass.NAME) in args.identity_flags else None
    return files if passphrase is None else [*files, passphrase]


def load_identities(args: "Arguments") -> "list[keys.LoadedIdentity | batchpass.Identity]":
    """The identities of the -i files and -j plugins, in the order given."""
    identities: "list[keys.LoadedIdentity | batchpass.Identity]" = []
    for kind, value in args.identity_flags:
        identities += _load_identity_file(value) if kind == "i" else [_plugin_identity(value)]
    return identities


def public_keys(identity: "keys.LoadedIdentity | batchpass.Identity") -> Sequence[Recipient]:
    """The recipients -e -i (or -e -j) encrypts to for one identity."""
    if isinstance(identity, batchpass.Identity):
        return [batchpass.recipient()]
    from agefast import keys

    # An encrypted identity file stands for all the identities inside it.
    if isinstance(identity, keys.EncryptedIdentityFile):
        return identity.recipients()
    try:
        return [identity.to_public()]
    except agefast.EncryptError as e:
        # A plugin identity's recipient runs its plugin: age's error and hints where it is not installed.
        _refuse_if_not_found(e)
        raise


def is_x25519(recipient: str) -> bool:
    """Whether agefast.keys.parse_recipient reads `recipient` as an X25519 key:
    "age1" and Bech32 data with no other "1" (that would be a plugin's or
    another type's), 32 bytes long. Such a key loads without failing, so the
    command may load it once a large file's payload is under way
    (agefast.cli.early_payload), without importing agefast.keys to ask."""
    if not recipient.startswith("age1") or recipient.count("1") != 1:
        return False
    try:
        hrp, data = bech32.decode(recipient)
    except bech32.Bech32Error:
        return False
    return hrp == "age" and len(data) == 32


def _parse_recipient(text: str) -> "keys.ParsedRecipient":
    if text.startswith("github:"):
        user = text.removeprefix("github:")
        raise UsageError('"github:" recipients were removed from the design', "instead, use recipient files like",
                         f"    curl -O https://github.com/{user}.keys", f"    agefast -R {user}.keys")
    from agefast import keys

    try:
        return keys.parse_recipient(text, _PLUGIN_PROMPTS)
    except agefast.RecipientError as e:
        _refuse_if_not_found(e)
        raise agefast.RecipientError(f"recipient {text!r}: {e}") from None


def listed_recipients(args: "Arguments") -> list[Recipient]:
    """The recipients of -p (asking for the passphrase), or of -r and -R."""
    if args.passphrase:
        return [agefast.passphrase.Recipient(_new_passphrase())]
    recipients: list[Recipient] = [_parse_recipient(text) for text in args.recipients]
    for path in args.recipients_files:
        def warn(message: str, path: str = path) -> None:
            # As age does, keys of SSH types age can't use are skipped, so an
            # authorized_keys file with such keys still works.
            print_warning(f"recipients file {path}: {message}")

        text = read_key_file(path, "recipients file")
        try:
            recipients += agefast.parse_recipients(text, _PLUGIN_PROMPTS, warn=warn)
        except agefast.RecipientError as e:
            _refuse_if_not_found(e)
            raise agefast.RecipientError(f"recipients file {path}: {e}") from None
    return recipients


def load_recipients(args: "Arguments") -> list[Recipient]:
    recipients = listed_recipients(args)
    for identity in load_identities(args):
        recipients += public_keys(identity)
    return recipients


def _same_passphrase(a: str, b: str) -> bool:
    """Whether two passphrases are the same, compared in constant time, as the bytes they stand for
    (compare_digest takes str only in ASCII)."""
    import hmac     # here, not with the module: it costs every command's start-up ~3 ms

    from agefast.primitives import passphrase_bytes

    return hmac.compare_digest(passphrase_bytes(a), passphrase_bytes(b))


def _new_passphrase() -> str:
    passphrase = read_passphrase("Enter passphrase (leave empty to autogenerate a secure one):")
    if not passphrase:
        from agefast.cli import wordlist

        passphrase = wordlist.generate_passphrase()
        # To the terminal only: the passphrase is for the user's eyes, not for logs of stderr.
        print_to_terminal(f"agefast: using autogenerated passphrase {go_quote(passphrase)}")
    elif not _same_passphrase(read_passphrase("Confirm passphrase:"), passphrase):
        raise UsageError("passphrases didn't match")
    return passphrase


class _PassphrasePrompt:
    """An identity that asks for a passphrase only if the file has an scrypt stanza.

    This is how age decrypts passphrase-encrypted files without a -p flag on
    decryption: the user is prompted only when a passphrase could help.
    """

    def unwrap(self, stanzas: list[Stanza]) -> bytes | None:
        # passphrase.STANZA_TYPE, spelled out: importing agefast.passphrase
        # (scrypt, and OpenSSL's backend with it) cost every decryption 10 ms.
        if not any(s.type == "scrypt" for s in stanzas):
            return None
        from agefast.recipients import scrypt

        scrypt.check_alone(stanzas)     # before the prompt: a passphrase typed for nothing, as age refuses it
        try:
            identity = scrypt.asked_identity(read_passphrase("Enter passphrase:"))
        except errors.DecryptError as e:
            raise UsageError(str(e)) from None     # age's words alone
        file_key = identity.unwrap(stanzas)
        if file_key is None:
            raise UsageError("incorrect passphrase")
        return file_key


class _RefusePassphrase:
    """Tried after the -i and -j identities: a passphrase-encrypted file needs no -i."""

    def unwrap(self, stanzas: list[Stanza]) -> None:
        if len(stanzas) == 1 and stanzas[0].type == "scrypt":
            raise UsageError("file is passphrase-encrypted but identities were specified with -i/--identity or -j",
                             "remove all -i/--identity/-j flags to decrypt passphrase-encrypted files")
        return None


def opening_identities(args: "Arguments",
                       loaded: "list[keys.LoadedIdentity | batchpass.Identity]") -> list[Identity]:
    """What opens a file: the identities `loaded` from the -i and -j flags, or a passphrase prompt without them."""
    return [*loaded, _RefusePassphrase()] if args.identity_flags else [_PassphrasePrompt()]


@contextlib.contextmanager
def identities_required(args: "Arguments") -> Iterator[None]:
    """age's error for a file no identity opened when none were given."""
    try:
        yield
    except errors.NoIdentityMatchError:
        if not args.identity_flags:
            raise UsageError("the file is not passphrase-encrypted, identities are required",
                             "specify identities with -i/--identity or -j to decrypt this file") from None
        raise
    except errors.DecryptError as e:
        # A plugin identity (an identity file's, -j's), tried where no native identity opened the file, whose
        # plugin is not installed: age's error and hints, as age gives them once it tried the identity.
        _refuse_if_not_found(e)
        raise
