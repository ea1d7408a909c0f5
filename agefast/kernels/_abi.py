"""The compiled functions' C interface, shared by the code that builds them and the code that calls them.

No numba here: a process that loads the kernels from the cache reads this
module and never imports numba.
"""

import struct

from ..io.pieces import FILE_WRITE_SIZE

CHUNK = 65536          # age STREAM chunk plaintext
TAG = 16

# int64 batch(call*), as ctypes and numba type names (_build turns them into a
# numba signature). `call` is the caller's scratch (below) with the call's
# arguments written at its start (BATCH_CALL_AT, as struct BATCH_CALL packs
# them): the 32-byte key, then counter, src*, n, dst*, m, final, mode. One
# pointer rather than nine arguments: ctypes converts each argument of a call
# (~0.1 us), and nine were ~3% of a call on one 64 KiB chunk on AVX-512.
BATCH_ARGS = ("voidptr",)
BATCH_RESULT = "int64"
BATCH_CALL = "<32sQQqQqqq"
BATCH_CALL_AT = 0
# After them (BATCH_AEAD, at BATCH_AEAD_AT): a 12-byte mask XORed into every
# chunk's nonce, and the address and size of associated data (RFC 8439's
# AAD) that every chunk authenticates. age's calls leave both zero (the
# scratch is zeroed): age's own nonces, no associated data. With them the
# batch seals and opens under any RFC 8439 nonce and AAD in the same loops
# as age's chunks (agefast.kernels._rfc8439, the Wycheproof tests): a chunk
# whose age nonce is N gets nonce N XOR mask.
BATCH_AEAD = "<12s4xQq"
BATCH_AEAD_AT = BATCH_CALL_AT + struct.calcsize(BATCH_CALL)     # 88: both within the 128 bytes below

SEAL, OPEN = 0, 1

# int64 file_batches(key*, mode, src_fd, src_at, dst_fd, dst_at, first, stride,
# batches, src_buffer*, dst_buffer*, scratch*, stop*, lock*): seal (mode SEAL)
# or open (OPEN) whole batches of one file into another with pread and pwrite,
# no Python and no GIL in between. A batch is FILE_BATCH chunks, none of them
# final: batch b is read from src_at + b * (its size in the input) and written
# to dst_at + b * (its size in the output), its chunks' counters from b *
# FILE_BATCH. A worker does batches first, first + stride, ... below
# `batches`; it checks the int64 at `stop` before each and ends early once
# another thread made it non-zero. The workers of one file share `lock`, a
# pthread mutex held while a batch is written: ext4 takes the file's lock for
# every write, and two threads writing at once spin on it (256 MiB: 0.16 s of
# system time against 0.11 s). An opened batch is written only if every chunk
# of it verified; a worker ends at the first batch that did not.
FILE_ARGS = ("voidptr", "int64", "int64", "int64", "int64", "int64", "int64", "int64", "int64", "voidptr",
             "voidptr", "voidptr", "voidptr", "voidptr")
FILE_RESULT = "int64"
FILE_BATCH = 32
PAGE = 4096            # a batch lies in its buffer at its file offset's place within a page
FILE_BUFFER_SIZE = FILE_BATCH * (CHUNK + TAG) + PAGE     # each of the two buffers
WRITE_PIECE = FILE_WRITE_SIZE  # writes are cut at the output file's multiples of this (agefast.io.pieces says why)
MUTEX_SIZE = 64        # room for a pthread_mutex_t (40 bytes on x86-64 glibc, 48 on arm64)
# file_batches' results: FILE_DONE, every batch done; else ENDED_AT + b *
# ENDINGS + why: the worker ended at its batch b, every one of its batches
# before b written whole and none from b on (b itself may be written in
# part), because it was STOPPED, a read or a write of b failed (READ_FAILED,
# WRITE_FAILED: the C library's errno tells why), the input ended in b
# (INPUT_ENDED) or a chunk of b did not verify (NOT_VERIFIED).
FILE_DONE, ENDED_AT = 0, 1
STOPPED, READ_FAILED, INPUT_ENDED, WRITE_FAILED, NOT_VERIFIED, ENDINGS = 1, 2, 3, 4, 5, 6   # none is FILE_DONE

# The caller's scratch for one batch call, zeroed but for the call's
# arguments (128 bytes at BATCH_CALL_AT): ChaCha20 state (16 uint32),
# Poly1305 context (16 uint64: r, s, the accumulator h, one free, the
# stitched loop's r^k for its second chain, six free), lane state (5 x 16 uint64), powers r^16 and
# r^(16-l) (9 x 16 uint64 each), 2080 bytes (zeros for the Poly1305 key
# block, keystream / tail, tag, pad block) and the next chunk's key (96
# uint64: r, s, r^k, the lanes' powers r^(16-l); where the split form makes
# it beside a chunk's lanes, _next_key). Offsets are multiples of 64; the
# kernels need 8-byte alignment.
STATE_AT = BATCH_CALL_AT + 128
CTX_AT = STATE_AT + 64
LANES_AT = CTX_AT + 128
POWERS_AT = LANES_AT + 5 * 16 * 8
FINAL_POWERS_AT = POWERS_AT + 9 * 16 * 8
BYTES_AT = FINAL_POWERS_AT + 9 * 16 * 8
BYTES_SIZE = 2080
NEXT_KEY_AT = BYTES_AT + (BYTES_SIZE + 63) // 64 * 64
NEXT_KEY_WORDS = 96
SCRATCH_SIZE = NEXT_KEY_AT + 8 * NEXT_KEY_WORDS

# The functions the compiled object defines.
SYMBOL = "agefast_batch"
FILE_SYMBOL = "agefast_file_batches"
