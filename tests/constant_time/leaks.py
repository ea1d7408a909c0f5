"""Test-only leaks put into the real kernels before they compile, so the constant-time check must find them.

inject(kind) replaces one helper in the kernel modules' globals (Numba
resolves a kernel's callees when it compiles it): "early exit", a tag
comparison that returns at the first byte that differs (the memcmp that
every hand-written MAC check is warned against); "table", a secret-indexed
table load, one S-box lookup by a key byte as ChaCha20's state is set (the
cache-timing leak of table-based AES). Call it in a build's own process,
before the build compiles (build_kernels.compile).
"""

import numpy as np
from numba.extending import register_jitable

KINDS = ("early exit", "table")
_SBOX = np.random.default_rng(0).permutation(256).astype(np.uint8)


def inject(kind: str) -> None:
    from agefast.kernels import _aead, _stitched
    from agefast.kernels._common import TAG

    if kind == "early exit":
        @register_jitable
        def early_exit(tag, at, sealed, n):
            for i in range(TAG):
                if tag[at + i] != sealed[n + i]:
                    return False
            return True

        _aead._tag_matches = _stitched._tag_matches = early_exit
    elif kind == "table":
        set_key = _aead._set_key

        @register_jitable
        def set_key_through_table(st, key):
            set_key(st, key)
            st[4] ^= np.uint32(_SBOX[key[0]])     # seal and open alike: the round trip still works

        _aead._set_key = set_key_through_table
    else:
        raise ValueError(f"no leak {kind!r}: {', '.join(KINDS)}")
