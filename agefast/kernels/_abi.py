"""The compiled batch function's C interface, shared by the code that builds it and the code that calls it.

No numba here: a process that loads the kernels from the cache reads this
module and never imports numba.
"""

# int64 batch(key*, counter, src*, n, dst*, m, final, mode, scratch*), as ctypes
# and numba type names (_build turns them into a numba signature).
BATCH_ARGS = ("voidptr", "uint64", "voidptr", "int64", "voidptr", "int64", "int64", "int64", "voidptr")
BATCH_RESULT = "int64"

SEAL, OPEN = 0, 1
CHUNK = 65536          # age STREAM chunk plaintext
TAG = 16

# The caller's scratch for one batch call, zeroed: ChaCha20 state (16 uint32),
# Poly1305 context (8 uint64), lane state (5 x 16 uint64), powers r^16 and
# r^(16-l) (9 x 16 uint64 each) and 2080 bytes (zeros for the Poly1305 key
# block, keystream / tail, tag, pad block). Offsets are multiples of 64; the
# kernels need 8-byte alignment.
STATE_AT = 0
CTX_AT = 64
LANES_AT = 128
POWERS_AT = LANES_AT + 5 * 16 * 8
FINAL_POWERS_AT = POWERS_AT + 9 * 16 * 8
BYTES_AT = FINAL_POWERS_AT + 9 * 16 * 8
BYTES_SIZE = 2080
SCRATCH_SIZE = BYTES_AT + BYTES_SIZE

# The one function the compiled object defines.
SYMBOL = "agefast_batch"
