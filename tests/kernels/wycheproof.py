"""Project Wycheproof's ChaCha20-Poly1305 vectors through whichever build of the kernels the process loaded.

Run in process (test_wycheproof.py, with cryptography as the reference) and
in each class's build in every form (test_subprocess.py). The vectors are
not part of this repository: AGEFAST_WYCHEPROOF names the folder holding
chacha20_poly1305_test.json (C2SP/wycheproof's testvectors_v1, Apache-2.0,
with its LICENSE), by default shared/vectors/wycheproof beside the checkout.
Without them a test skips, with the reason, or fails under
AGEFAST_REQUIRE_TOOLS=1.

Each vector goes through agefast.kernels._rfc8439 (its nonce and
associated data are not age's) as one chunk, and as the last chunk of a
final batch behind `lead` whole chunks, so that the batch loops' tails and
the step from one chunk to the next are the ones that meet it.
"""

import json
import os
import pathlib
import random
from typing import NamedTuple

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from agefast.kernels import _rfc8439, CHUNK_SIZE, TAG_SIZE

FOLDER = pathlib.Path(os.environ.get("AGEFAST_WYCHEPROOF")
                      or pathlib.Path(__file__).resolve().parents[3] / "shared" / "vectors" / "wycheproof")
FILE = FOLDER / "chacha20_poly1305_test.json"
FILL = 0xA5
SPARE = bytes([FILL]) * 16     # after each output: a write past its end shows


def require() -> None:
    """Skip the calling test, with the reason, where the vectors are missing; fail it under AGEFAST_REQUIRE_TOOLS=1."""
    if FILE.is_file():
        return
    # here, not at the top: the builds' subprocesses import this module without tests/ on their path
    from required import unavailable

    unavailable(f"the Wycheproof vectors are not at {FILE} (set AGEFAST_WYCHEPROOF)")


class Vector(NamedTuple):
    tc: int
    key: bytes
    nonce: bytes
    aad: bytes
    msg: bytes
    ct: bytes
    tag: bytes
    valid: bool


def load() -> list[Vector]:
    """Every test of the file; ValueError where the file does not hold the number of tests it says."""
    data = json.loads(FILE.read_text())
    vectors = [Vector(t["tcId"], *(bytes.fromhex(t[f]) for f in ("key", "iv", "aad", "msg", "ct", "tag")),
                      t["result"] == "valid")
               for group in data["testGroups"] for t in group["tests"]]
    if len(vectors) != data["numberOfTests"] or any(t.tag and len(t.tag) != TAG_SIZE for t in vectors):
        raise ValueError(f"{FILE} does not hold its {data['numberOfTests']} tests of 16-byte tags")
    return vectors


def _expected_lead(v: Vector, plain: bytes, lead: int) -> bytes:
    """The `lead` chunks of `plain` sealed ahead of v's message, by cryptography: chunk i's nonce is
    its age nonce (i as 11 bytes big-endian, not final) XOR the mask that gives v's message, the
    last (number `lead`, final), v's nonce; every chunk authenticates v's associated data."""
    last = lead.to_bytes(11, "big") + b"\x01"
    aead = ChaCha20Poly1305(v.key)
    out = b""
    for i in range(lead):
        nonce = bytes(a ^ b ^ c for a, b, c in zip(v.nonce, last, i.to_bytes(11, "big") + b"\x00"))
        out += aead.encrypt(nonce, plain[i * CHUNK_SIZE:(i + 1) * CHUNK_SIZE], v.aad)
    return out


def _at(data: bytes, offset: int) -> tuple[bytearray, memoryview]:
    """A buffer holding `data` `offset` bytes into it (any alignment), then SPARE; and `data`'s part of it."""
    buf = bytearray(offset) + bytearray(data) + SPARE
    return buf, memoryview(buf)[offset:offset + len(data)]


def check_vector(v: Vector, stitched: bool, lead: int, plain: bytes, threads: int = 1) -> None:
    """v sealed and opened as the last chunk of a batch behind `lead` whole chunks of `plain`.

    A valid vector seals to its ciphertext and tag and opens to its message;
    an invalid one (a tag changed) seals to its ciphertext under another tag,
    and does not open: every chunk before it opens, and where its message
    would have gone dst holds zeros (stitched and split: decrypted while
    hashed, then wiped) or what was there (two passes: never written). A
    batch cannot end in an empty chunk behind whole ones, so an empty
    message is only opened there.
    """
    head = plain[:lead * CHUNK_SIZE]
    before = _expected_lead(v, head, lead) if lead else b""
    n = len(v.msg)
    where = f"tcId {v.tc}, {lead} chunks before it"
    if n or not lead:
        buf, sealed = _at(bytes(len(before) + n + TAG_SIZE), v.tc % 8)
        assert _rfc8439.seal_batch(v.key, v.nonce, v.aad, head + v.msg, sealed, threads) == len(sealed), where
        assert sealed[:len(before)] == before, where
        assert sealed[len(before):len(before) + n] == v.ct, where
        assert (sealed[len(before) + n:] == v.tag) == v.valid, where
        assert buf.endswith(SPARE), where
    buf, back = _at(bytes([FILL]) * (len(head) + n), (v.tc + 3) % 8)
    opened = _rfc8439.open_batch(v.key, v.nonce, v.aad, before + v.ct + v.tag, back, threads)
    assert opened == lead + v.valid and buf.endswith(SPARE), where
    assert back[:len(head)] == head, where
    left = v.msg if v.valid else bytes(n) if stitched else bytes([FILL]) * n
    assert back[len(head):] == left, where


def check_rejected(v: Vector) -> None:
    """A nonce of another size than 12 bytes: seal and open refuse it with ValueError, whose message says so."""
    n = len(v.msg)
    for call, src, dst in ((_rfc8439.seal_batch, v.msg, n + TAG_SIZE),
                           (_rfc8439.open_batch, v.msg + bytes(TAG_SIZE), n)):
        try:
            call(v.key, v.nonce, v.aad, src, bytearray(dst))
        except ValueError as e:
            assert "nonce" in str(e), (v.tc, e)
            continue
        raise AssertionError(f"tcId {v.tc}: a {len(v.nonce)}-byte nonce was taken by {call.__name__}")


def check(vectors: list[Vector], stitched: bool, label: str, leads: tuple[int, ...] = (0, 1),
          threads: int = 1) -> str:
    """Every vector through check_vector behind each number of chunks in `leads` (or check_rejected);
    returns the line that says what passed."""
    plain = random.Random(47).randbytes(max(leads) * CHUNK_SIZE)
    valid = invalid = rejected = 0
    for v in vectors:
        if len(v.nonce) != _rfc8439.NONCE_SIZE:
            check_rejected(v)
            rejected += 1
            continue
        for lead in leads:
            check_vector(v, stitched, lead, plain, threads)
        valid += v.valid
        invalid += not v.valid
    return (f"wycheproof {label}: {len(vectors)} vectors, {valid} valid, {invalid} invalid passed "
            f"and {rejected} nonces of other sizes refused (behind {', '.join(map(str, leads))} chunks)")
