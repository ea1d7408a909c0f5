"""The STREAM rules of age's payload, each stated once.

A payload is a 16-byte nonce, then the plaintext cut into chunks of
CHUNK_SIZE bytes, each sealed with ChaCha20-Poly1305 under the payload key
and followed by its 16-byte tag. Chunk i's nonce is i as 11 bytes big-endian,
then one byte: 0x01 for the final chunk, else 0x00. Only the final chunk may
be shorter than CHUNK_SIZE, and it is empty only when the whole plaintext is.
The payload ends with its final chunk: nothing may follow it.

Everything here is arithmetic on sizes and the two derivations; the engine
(agefast.payload.engine) seals and opens, and agefast.payload.stream and
.seekable read and write whole payloads by these rules.
"""

import struct
from typing import TYPE_CHECKING

from ..errors import PayloadError, TruncatedError

if TYPE_CHECKING:
    from collections.abc import Callable

CHUNK_SIZE = 64 * 1024
TAG_SIZE = 16
SEALED_CHUNK_SIZE = CHUNK_SIZE + TAG_SIZE
NONCE_SIZE = 16         # the payload's nonce, after the header
CHUNK_NONCE_SIZE = 12

# How many chunks each way of moving a payload takes at a time, here so that
# they are read side by side (the compiled file kernel's, FILE_BATCH = 32, is
# part of its C interface: agefast.kernels._abi).
# - The streaming writer and reader and random access buffer this many:
#   1 MiB, as much as a small batch that stays on cryptography.
STREAM_BATCH = 16
# - The threaded pipeline hands each worker this many (2 MiB), enough to
#   amortize a hand-off, few enough that every core has a batch.
PIPELINE_BATCH = 32
# - The pipeline's first batch: a payload that ends there (a small file) is
#   done without starting a thread or allocating a batch.
PIPELINE_FIRST = 1
# - Random access opens a large read's whole chunks with one read of the
#   source and one call of the engine, up to this many (4 MiB): each call
#   costs a read, a hand-off to the engine's threads and their wake-ups
#   (readinto of a 17 MB file: 19.5 ms of CPU in batches of 16 chunks, 16.7
#   in batches of 64, where reading the ciphertext took 2.9 and decrypt_into
#   13.9; medians of 40, on 2 cores at load average 8).
DIRECT_CHUNKS = 64
# - A decryptor's peek gives at most this much (io.DEFAULT_BUFFER_SIZE, what
#   BufferedReader.peek gives): IOBase.readline reads up to the next newline
#   in what peek gives, and copied a whole batch for every short line.
PEEK_SIZE = 8192
# - A payload in memory goes to the engine in steps of this many (16 MiB),
#   each once its part of a new result is faulted in (agefast.io.buffers).
MEMORY_STEP = 256
# - Batches of fewer chunks stay on cryptography: below this the kernels'
#   per-call cost is not won back (docs/engine.md).
KERNEL_MIN_CHUNKS = 4
# - Batches of fewer chunks run on the calling thread alone, as one kernel
#   call: waking the engine's threads is not won back. That call releases
#   the GIL, so callers on several threads seal and open at once.
KERNEL_SPLIT_CHUNKS = 16


def next_stream_batch(chunks: int) -> int:
    """How many chunks a stream's batch holds after a whole one of `chunks`:
    twice as many, up to STREAM_BATCH. Its first batch is one chunk, so that
    a small stream never clears a whole batch's buffer (the streaming writer
    and reader, agefast.payload.stream, and agefast.encrypt_reader)."""
    return min(2 * chunks, STREAM_BATCH)


def opened_before_failure(read: int, chunk: int) -> int:
    """Of `read` bytes of chunks of `chunk` bytes read before the input
    failed, the bytes of the chunks age opens before it reports the failure:
    those with a byte after them (age reads each chunk and one byte more,
    which tells a middle chunk from the final one)."""
    return max(read - 1, 0) // chunk * chunk


def payload_key(file_key: bytes, nonce: bytes, hmac_sha256: "Callable[[bytes, bytes], bytes] | None" = None) -> bytes:
    """HKDF-SHA-256(file key, salt=nonce, info="payload"), age's payload key:
    one block of HKDF output (RFC 5869).

    `hmac_sha256(key, data)` is the HMAC it is derived with: cryptography's
    (agefast.primitives), which every header needs anyway, unless the caller
    runs before cryptography is imported (the command's head start passes the
    standard library's, whose OpenSSL binding other processes need not load).
    """
    if hmac_sha256 is None:
        from ..primitives import hmac_sha256 as cryptography_hmac_sha256

        hmac_sha256 = cryptography_hmac_sha256
    pseudorandom_key = hmac_sha256(nonce, file_key)
    return hmac_sha256(pseudorandom_key, b"payload\x01")


def chunk_nonce(nonce: bytearray, counter: int, final: bool) -> None:
    """Write chunk `counter`'s 12-byte nonce into `nonce`."""
    struct.pack_into(">xxxQB", nonce, 0, counter, 1 if final else 0)


def _lone_chunk_nonce() -> bytes:
    nonce = bytearray(CHUNK_NONCE_SIZE)
    chunk_nonce(nonce, 0, True)
    return bytes(nonce)


# The nonce of a payload's only chunk: chunk 0, final.
LONE_CHUNK_NONCE = _lone_chunk_nonce()


def sealed_size(plaintext_size: int) -> int:
    """The payload bytes after the nonce that hold `plaintext_size` bytes of plaintext."""
    chunks = max(1, -(-plaintext_size // CHUNK_SIZE))
    return plaintext_size + chunks * TAG_SIZE


def end_problem(payload_size: int) -> PayloadError | None:
    """Why no payload is `payload_size` bytes long (after the nonce), or None.

    Only the final chunk may be short, so the size tells where it starts. A
    size that is a multiple of SEALED_CHUNK_SIZE is a payload whose final
    chunk is a whole one; the reader, which learns which chunk is final from
    its tag, says more when it turns out not to be (stream.open_batch).

    Every chunk holds at least its tag, so a payload with no chunk, or whose
    last chunk is shorter than a tag, was cut short. A last chunk of a tag
    alone is an empty final chunk, which age refuses with these words ("last
    chunk is empty") and does not call truncated: an encoder may have written
    it, and a file cut 16 bytes into a chunk looks the same.
    """
    full, rest = divmod(payload_size, SEALED_CHUNK_SIZE)
    if rest == 0 and full == 0:
        return TruncatedError("the file is truncated: it ends before the first chunk")
    if 0 < rest < TAG_SIZE:
        return TruncatedError(f"the file is truncated: it ends inside chunk {full}")
    if rest == TAG_SIZE and full > 0:
        return PayloadError("the final chunk is empty")
    return None


def chunk_count(payload_size: int) -> int:
    """How many chunks, the last one possibly short, `payload_size` bytes hold."""
    return -(-payload_size // SEALED_CHUNK_SIZE)


def plaintext_size(payload_size: int) -> int:
    """The plaintext a payload of `payload_size` bytes (after the nonce) holds if
    it is valid: every chunk is CHUNK_SIZE bytes and a tag, the last one shorter."""
    full, rest = divmod(payload_size, SEALED_CHUNK_SIZE)
    return full * CHUNK_SIZE + max(0, rest - TAG_SIZE)
