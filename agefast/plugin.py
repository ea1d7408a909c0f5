"""age plugins: recipients `age1NAME1...` and identities `AGE-PLUGIN-NAME-1...`
served by a program `age-plugin-NAME` on the PATH.

The API is pyrage's: parse strings with `Recipient.from_str` and
`Identity.from_str`, then give `RecipientPluginV1` to `encrypt` and
`IdentityPluginV1` to `decrypt`. `callbacks` is any object with some of
pyrage's methods, called when the plugin wants the user:

    display_message(message) -> None
    confirm(message, yes_string, no_string_or_None) -> bool | None
    request_public_string(description) -> str | None
    request_passphrase(description) -> str | None

A missing method, an exception or None is reported to the plugin as a refusal.

This module is the public name of agefast.recipients.plugin (pyrage's name).
"""

from .recipients.plugin import check_name, find_binary, Recipient, Identity, RecipientPluginV1, IdentityPluginV1

__all__ = ["check_name", "find_binary", "Recipient", "Identity", "RecipientPluginV1", "IdentityPluginV1"]
