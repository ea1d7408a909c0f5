"""ChaCha20-Poly1305 as RFC 8439 has it, any 12-byte nonce and associated data, through the batch kernel.

For the tests that hold the kernels to published vectors (Wycheproof:
tests/kernels/wycheproof.py). age's chunks have nonces of their own (a
counter and the final flag) and no associated data, so seal_chunks and
open_chunks cannot take those vectors. Here the batch kernel is given a mask
for its chunks' nonces and the associated data (_abi.BATCH_AEAD) and runs
the very loops that seal and open age's chunks (stitched, split or two
passes): a message of at most CHUNK_SIZE bytes is one chunk, under exactly
`nonce`; a longer one is a final batch whose last chunk gets `nonce` and
whose other chunks get what the same mask makes of their age nonces (all
distinct), so that a vector can sit at the end of a batch.
"""

import contextlib
import struct
from typing import Any

from ..io import lending
from . import _abi
from ._batches import _key, _run, CHUNK_SIZE, Nonces, SEALED_CHUNK_SIZE, TAG_SIZE

NONCE_SIZE = 12
# chunk i's nonce in age, as _chacha20._age_nonce makes it: i as 11 bytes
# big-endian, then 1 on the final chunk (agefast.payload.rules states the
# rule; kernels sit below payload)
_AGE_NONCE = struct.Struct(">xxxQB")


def _nonce(nonce: Any) -> bytes:
    try:
        data = bytes(memoryview(nonce).cast("B"))
    except TypeError:
        raise TypeError("nonce must be a bytes-like object") from None
    if len(data) != NONCE_SIZE:
        raise ValueError(f"nonce must be {NONCE_SIZE} bytes")
    return data


def _under_nonce(mode: int, key: Any, nonce: Any, aad: Any, src: object, dst: object, threads: int | None) -> int:
    """A final batch of `mode` (_abi.SEAL or OPEN) from src into dst, its last chunk under `nonce`, each
    authenticating `aad`.

    The sizes are checked as seal_chunks and open_chunks check a final
    batch's; not through a helper of theirs, which would cost age's every
    call ~0.1 us (benchmarks/HISTORY.md, 2026-12-05).
    """
    k, data = _key(key), _nonce(nonce)
    with contextlib.ExitStack() as lent:
        aad_at, aad_size, aad_hold = lending.lend(aad, writable=False)
        lent.callback(lending.release, aad_hold)
        s_at, n, s_hold = lending.lend(src, writable=False)
        lent.callback(lending.release, s_hold)
        if mode == _abi.SEAL:
            chunks = max(1, -(-n // CHUNK_SIZE))
            size, steps = n + chunks * TAG_SIZE, (CHUNK_SIZE, SEALED_CHUNK_SIZE)
        else:
            if n < TAG_SIZE:
                raise ValueError("a batch must hold whole sealed chunks")
            chunks = -(-n // SEALED_CHUNK_SIZE)
            size, steps = max(0, n - chunks * TAG_SIZE), (SEALED_CHUNK_SIZE, CHUNK_SIZE)
        # the mask that turns the last chunk's age nonce into `nonce`
        mask = bytes(a ^ b for a, b in zip(data, _AGE_NONCE.pack(chunks - 1, 1)))
        return _run(mode, k, 0, s_at, n, dst, size, True, threads, chunks, *steps, Nonces(mask, aad_at, aad_size))


def seal_batch(key: Any, nonce: Any, aad: Any, src: object, dst: object, threads: int | None = 1) -> int:
    """Seal `src` into `dst` (ciphertext || tag, chunk by chunk) under `key`, the last chunk under `nonce`,
    every chunk authenticating `aad`; returns bytes written."""
    return _under_nonce(_abi.SEAL, key, nonce, aad, src, dst, threads)


def open_batch(key: Any, nonce: Any, aad: Any, src: object, dst: object, threads: int | None = 1) -> int:
    """Open what seal_batch wrote, from `src` into `dst`; returns how many leading chunks verified
    (agefast.kernels.open_chunks says what `dst` then holds)."""
    return _under_nonce(_abi.OPEN, key, nonce, aad, src, dst, threads)
