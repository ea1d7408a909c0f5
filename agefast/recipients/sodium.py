"""libsodium, through PyNaCl, for what it does faster than OpenSSL: X25519
(agefast.recipients.x25519; its fixed-base multiplication above all) and
scrypt (agefast.recipients.scrypt).

Imported on first use: 3.5-4.5 ms, which each caller weighs against what it
saves. Never in FIPS mode, where cryptography refuses X25519 and scrypt and
libsodium must not be a way around it; never without PyNaCl (installed with
--no-deps), where cryptography does the work.
"""

from collections.abc import Callable
from typing import Any

_bindings: Any = None     # PyNaCl's bindings once imported; False if they cannot be

_is_fips_enabled: Callable[[], bool] | None
try:
    # Asked at every call (0.1 us), as a process may turn FIPS mode on.
    from cryptography.hazmat.bindings._rust import openssl as _openssl

    _is_fips_enabled = _openssl.is_fips_enabled
except (ImportError, AttributeError):      # a cryptography without it: FIPS mode cannot be ruled out
    _is_fips_enabled = None


def _fips_mode_or_unknown() -> bool:
    return _is_fips_enabled is None or bool(_is_fips_enabled())


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
