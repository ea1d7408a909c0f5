"""libsodium, through PyNaCl, for what it does faster than OpenSSL: X25519's
fixed-base multiplication (agefast.recipients.x25519) and scrypt
(agefast.recipients.scrypt).

Imported on first use: 3.5-4.5 ms, which each caller weighs against what it
saves. Never in FIPS mode, where cryptography refuses X25519 and scrypt and
libsodium must not be a way around it; never without PyNaCl (installed with
--no-deps), where cryptography does the work.
"""

from typing import Any

_bindings: Any = None     # PyNaCl's bindings once imported; False if they cannot be


def _fips_mode_or_unknown() -> bool:
    try:
        from cryptography.hazmat.bindings._rust import openssl

        return bool(openssl.is_fips_enabled())
    except (ImportError, AttributeError):
        return True


def bindings() -> Any:
    """PyNaCl's bindings, or None where libsodium is not to be used."""
    global _bindings
    if _fips_mode_or_unknown():
        return None
    if _bindings is None:
        try:
            from nacl import bindings as imported
        except ImportError:
            _bindings = False
        else:
            _bindings = imported
    return _bindings or None
