"""The answer every build of the kernels must give before a job runs on it.

The cache and the shipped build's manifest make sure that the bytes loaded
are the bytes compiled; this makes sure that what they compute on this CPU
is age's ChaCha20-Poly1305. A build for a class no machine at hand could run
(the AVX-512 classes went untested for days of changes) or a miscompile
would otherwise seal files nobody can open. One call seals a fixed batch of
two chunks, a whole one and 1,500 bytes (the stitched loop, the bridge
between chunks, a tail, the two passes' Poly1305 lanes), and its SHA-256 must
be cryptography's (SEALED_SHA256; tests/kernels/test_known_answer.py checks
it against cryptography); then it must open back, and not with a bit flipped.
"""

import ctypes
import hashlib

from ..io import lending
from . import _abi, _native

KEY = bytes(range(32))
COUNTER = 7
PLAINTEXT = (bytes(range(251)) * 268)[:_abi.CHUNK + 1500]
SEALED_SIZE = len(PLAINTEXT) + 2 * _abi.TAG
SEALED_SHA256 = "eb15ec36ead11ce3ff1170a93f82e4a91a1ed4d9e01dafe181974dc28cb14883"


class WrongAnswer(RuntimeError):
    """The loaded kernels do not compute ChaCha20-Poly1305 as cryptography does on this CPU."""


def _call(functions: _native.Functions, mode: int, counter: int, src: bytes, size: int) -> tuple[int, bytes]:
    dst = ctypes.create_string_buffer(size)
    at, n, hold = lending.lend(src, writable=False)
    try:
        done = functions.batch(_native.batch_call(KEY, counter, at, n, ctypes.addressof(dst), size, True, mode))
    finally:
        lending.release(hold)
    return done, dst.raw


def check(functions: _native.Functions, isa: str) -> None:
    """WrongAnswer unless `functions` seal and open the known batch as they must."""
    written, sealed = _call(functions, _abi.SEAL, COUNTER, PLAINTEXT, SEALED_SIZE)
    if written != SEALED_SIZE or hashlib.sha256(sealed).hexdigest() != SEALED_SHA256:
        raise WrongAnswer(f"the kernels built for {isa} seal a known batch wrongly on this CPU")
    opened, plaintext = _call(functions, _abi.OPEN, COUNTER, sealed, len(PLAINTEXT))
    # The second chunk alone, one bit flipped: a tag that does not verify must fail it.
    flipped = bytearray(sealed[_abi.CHUNK + _abi.TAG:])
    flipped[100] ^= 1
    refused, _ = _call(functions, _abi.OPEN, COUNTER + 1, bytes(flipped), len(flipped) - _abi.TAG)
    if opened != 2 or plaintext != PLAINTEXT or refused != 0:
        raise WrongAnswer(f"the kernels built for {isa} open a known batch wrongly on this CPU")
