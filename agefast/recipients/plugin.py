"""age plugins: recipients `age1NAME1...` and identities `AGE-PLUGIN-NAME-1...`
served by a program `age-plugin-NAME` on the PATH.

The callbacks and the pyrage API are described in agefast.plugin.
"""

import re
import shutil
from collections.abc import Iterable
from typing import TypeVar

from .. import _arguments
from . import plugin_protocol
from ..format import bech32
from ..io import trust
from ..errors import DecryptError, EncryptError, IdentityError, RecipientError
from ..format.grammar import Stanza

# Plugin names become part of a program name that is looked up on PATH, so
# they are restricted to characters that cannot form a path ("../x", "/bin/sh").
_NAME = re.compile(r"[A-Za-z0-9+\-._]+")
_RECIPIENT_PREFIX = "age1"
_IDENTITY_PREFIX = "AGE-PLUGIN-"


def check_name(name: str, error: type[Exception]) -> str:
    """`name` as given, or `error` if it is not a valid plugin name.

    Its case is kept, as age keeps it: `age -j NAME` runs age-plugin-NAME. Only
    names read from keys are lower case (a Bech32 string has one case).
    """
    if not _NAME.fullmatch(_arguments.text("plugin name", name)):
        raise error(f"Invalid plugin name {name[:32]!r}: use only letters, digits and + - . _")
    return name


def _decode(s: str, error: type[Exception]) -> tuple[str, bytes]:
    try:
        return bech32.decode(_arguments.text("v", s))
    except bech32.Bech32Error as e:
        raise error(f"invalid Bech32 encoding: {e}") from None


# What the error for a plugin that is not on the PATH says (the command's hint looks for it).
NOT_INSTALLED = "is the plugin installed?"


def find_binary(name: str) -> str | None:
    """The path of age-plugin-NAME on the PATH, or None if it is not installed."""
    return shutil.which(f"age-plugin-{name}")


def missing_plugin(e: Exception) -> str | None:
    """The name of the plugin whose program `e` says was not found on the PATH (_binary), else None."""
    found = re.search(r"could not find age-plugin-(\S+) on the PATH; " + re.escape(NOT_INSTALLED), str(e))
    return None if found is None else found.group(1)


def _binary(name: str, error: type[Exception]) -> plugin_protocol.Program:
    """The plugin's program, as found on the PATH and by its real path: never one found in the current folder (a
    relative PATH entry, as Go's exec.LookPath refuses it) nor one another account could have put or changed
    there (agefast.io.trust.checked_program)."""
    binary = find_binary(name)
    if binary is None:
        raise error(f"could not find age-plugin-{name} on the PATH; {NOT_INSTALLED}")
    real, why = trust.checked_program(binary)
    if why is not None:
        raise error(f"age-plugin-{name} is not run: {why}")
    return plugin_protocol.Program(binary, real)


class Recipient:
    """A plugin recipient, `age1NAME1...`; its plugin does the wrapping."""

    def __init__(self, name: str, data: bytes):
        self._name = check_name(name, RecipientError).lower()
        self._encoding = bech32.encode(_RECIPIENT_PREFIX + self._name, data)

    @classmethod
    def from_str(cls, v: str) -> "Recipient":
        """The plugin recipient written `v` (age1NAME1...); RecipientError if it is not one."""
        hrp, data = _decode(v, RecipientError)
        if not hrp.startswith(_RECIPIENT_PREFIX) or hrp != hrp.lower() or len(hrp) == len(_RECIPIENT_PREFIX):
            raise RecipientError(f"invalid HRP: not a plugin recipient: prefix {hrp[:32]!r} is not age1NAME")
        return cls(hrp[len(_RECIPIENT_PREFIX):], data)

    def plugin(self) -> str:
        """The plugin's name: NAME of the program age-plugin-NAME that serves this recipient."""
        return self._name

    def __str__(self) -> str:
        return self._encoding

    def __repr__(self) -> str:
        return f"<plugin.Recipient {self._encoding}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Recipient) and other._encoding == self._encoding

    def __hash__(self) -> int:
        return hash(self._encoding)


class Identity:
    """A plugin identity, `AGE-PLUGIN-NAME-1...`; its plugin does the unwrapping."""

    def __init__(self, name: str, data: bytes):
        """The identity of plugin `name` (its case kept, as age's `-j NAME` keeps it) with `data`."""
        self._name = check_name(name, IdentityError)
        self._encoding = bech32.encode(f"{_IDENTITY_PREFIX}{self._name.upper()}-", data)

    @classmethod
    def from_str(cls, v: str) -> "Identity":
        """The plugin identity written `v` (AGE-PLUGIN-NAME-1...); IdentityError if it is not one."""
        hrp, data = _decode(v, IdentityError)
        if not (hrp.startswith(_IDENTITY_PREFIX) and hrp.endswith("-") and hrp == hrp.upper()
                and len(hrp) > len(_IDENTITY_PREFIX) + 1):
            raise IdentityError("invalid HRP: not a plugin identity: prefix is not AGE-PLUGIN-NAME-")
        return cls(hrp[len(_IDENTITY_PREFIX):-1].lower(), data)

    @classmethod
    def default_for_plugin(cls, plugin: str) -> "Identity":
        """The data-less identity that lets a plugin pick its own keys, its name in lower case as pyrage's
        (the command's `-j NAME` keeps the case given, as age's)."""
        return cls(check_name(plugin, IdentityError).lower(), b"")

    def plugin(self) -> str:
        """The plugin's name: NAME of the program age-plugin-NAME that serves this identity."""
        return self._name

    def __str__(self) -> str:
        return self._encoding

    def __repr__(self) -> str:
        return f"<plugin.Identity for age-plugin-{self._name}>"


_Key = TypeVar("_Key", "Recipient", "Identity")


def _of_plugin(name: str, argument: str, keys: Iterable[object], kind: type[_Key]) -> list[_Key]:
    """The keys of the plugin `name` among `keys` (the `argument`), each a `kind` (TypeError otherwise, as
    pyrage's: a plugin identity among recipients would go to the plugin as one). The others are left out, as age's Rust
    RecipientPluginV1 and IdentityPluginV1 (pyrage's) filter them, so that one list of every plugin key can go
    to each plugin; handed over, another plugin's key would leak to this program."""
    keys = list(keys)
    for key in keys:
        if not isinstance(key, kind):
            raise TypeError(f"argument '{argument}': '{type(key).__name__}' object cannot be converted to "
                            f"'{kind.__name__}'")
    return [key for key in keys if isinstance(key, kind) and key.plugin() == name]


def _without_program(key: "RecipientPluginV1 | IdentityPluginV1") -> dict[str, object]:
    """A plugin key's state to pickle: all but the program it found, which where it is unpickled (a Dask
    worker) is found and checked again (_binary). Kept, a worker had run what lay at that path however others
    could change it there."""
    return {**key.__dict__, "_binary": None}


class RecipientPluginV1:
    """Wraps file keys with plugin `plugin_name` to its recipients and identities.

    Of `recipients` (plugin.Recipient) and `identities` (plugin.Identity,
    for age -e -i), the plugin's own are used and others left out, as
    pyrage's are; `callbacks` answers the plugin's questions to the user
    (see the module's documentation). EncryptError if the plugin is not on
    PATH, and when wrapping where none of the keys is the plugin's.
    """

    def __init__(self, plugin_name: str, recipients: Iterable[Recipient], identities: Iterable[Identity],
                 callbacks: object) -> None:
        # the keys' types first, as pyrage's arguments are converted before the call
        self._recipients = [str(key) for key in _of_plugin(plugin_name, "recipients", recipients, Recipient)]
        self._identities = [str(key) for key in _of_plugin(plugin_name, "identities", identities, Identity)]
        self._name = check_name(plugin_name, EncryptError)
        self._binary: plugin_protocol.Program | None = _binary(self._name, EncryptError)
        self._callbacks = callbacks
        # The labels the plugin asked for (say, "postquantum"), known once it
        # wrapped: make_header reads them after wrapping and refuses a mix.
        self.labels: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return f"<plugin.RecipientPluginV1 age-plugin-{self._name}>"

    def __getstate__(self) -> dict[str, object]:
        return _without_program(self)

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """The plugin's stanzas for `file_key` (running age-plugin-NAME --age-plugin=recipient-v1)."""
        if not self._recipients and not self._identities:
            raise EncryptError(f"no recipients or identities for the {self._name} plugin")
        if self._binary is None:
            self._binary = _binary(self._name, EncryptError)
        try:
            stanzas, labels = plugin_protocol.wrap(
                self._binary, self._recipients, self._identities, file_key, self._callbacks)
        except plugin_protocol.ProtocolError as e:
            raise EncryptError(f"{self._name} plugin: {e}") from None
        self.labels = labels
        return stanzas


class IdentityPluginV1:
    """Unwraps file keys with plugin `plugin_name`, using its identities.

    Of `identities` (plugin.Identity), the plugin's own are used, as in
    RecipientPluginV1; `callbacks` as there. DecryptError if the plugin is
    not on PATH.
    """

    def __init__(self, plugin_name: str, identities: Iterable[Identity], callbacks: object) -> None:
        self._set_up(plugin_name, identities, callbacks)
        self._binary: plugin_protocol.Program | None = _binary(self._name, DecryptError)

    @classmethod
    def found_when_used(cls, plugin_name: str, identities: Iterable[Identity],
                        callbacks: object) -> "IdentityPluginV1":
        """As IdentityPluginV1(...), but the plugin is looked for when the identity is first tried, as age's
        identity files have it: a file with a plugin's identity beside native ones opens with those where the
        plugin is not installed (native identities are tried first: agefast.header)."""
        identity = cls.__new__(cls)
        identity._set_up(plugin_name, identities, callbacks)
        identity._binary = None
        return identity

    def _set_up(self, plugin_name: str, identities: Iterable[Identity], callbacks: object) -> None:
        self._keys = _of_plugin(plugin_name, "identities", identities, Identity)
        self._name = check_name(plugin_name, DecryptError)
        self._identities = [str(key) for key in self._keys]
        self._callbacks = callbacks

    def __repr__(self) -> str:
        return f"<plugin.IdentityPluginV1 age-plugin-{self._name}>"

    def __getstate__(self) -> dict[str, object]:
        return _without_program(self)

    def to_public(self) -> RecipientPluginV1:
        """A recipient that wraps to these identities (the plugin's add-identity), for age -e -i."""
        return RecipientPluginV1(self._name, [], self._keys, self._callbacks)

    def unwrap(self, stanzas: list[Stanza]) -> bytes | None:
        """The file key the plugin finds in `stanzas` (running age-plugin-NAME
        --age-plugin=identity-v1), or None; DecryptError if the plugin fails."""
        if self._binary is None:
            self._binary = _binary(self._name, DecryptError)
        try:
            return plugin_protocol.unwrap(self._binary, self._identities, stanzas, self._callbacks)
        except plugin_protocol.ProtocolError as e:
            raise DecryptError(f"{self._name} plugin: {e}") from None
