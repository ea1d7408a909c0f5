"""Memory held by encryptor/decryptor does not grow with stream length."""

import tracemalloc

import agefast
from streams import Sink

IDENTITY = agefast.x25519.Identity.generate()
RECIPIENT = IDENTITY.to_public()
BLOCK = bytes(range(256)) * 1024  # 256 KiB


def peak_encrypting(blocks: int, path) -> int:
    with open(path, "wb") as f:
        tracemalloc.start()
        with agefast.encryptor(f, [RECIPIENT]) as w:
            for _ in range(blocks):
                w.write(BLOCK)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def peak_decrypting(path) -> int:
    with open(path, "rb") as f:
        tracemalloc.start()
        agefast.decrypt_io(f, Sink(), [IDENTITY])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def test_streaming_memory_is_flat(tmp_path):
    small, large = tmp_path / "small.age", tmp_path / "large.age"
    # A stream loads the kernels once it has moved 32 MiB, once per process
    # (~320 KB the process keeps): done here first, so that it is not counted
    # against the 64 MiB stream alone when this test runs by itself.
    peak_encrypting(256, large)
    # 16 MiB is enough to fill the pipeline's ring; 64 MiB only takes longer.
    enc_small = peak_encrypting(64, small)      # 16 MiB
    enc_large = peak_encrypting(256, large)     # 64 MiB
    dec_small = peak_decrypting(small)
    dec_large = peak_decrypting(large)
    # The same fixed buffers serve any length: the pipeline ring of three 4 MiB
    # batches at most, independent of size.
    assert enc_large - enc_small < 128 * 1024
    assert dec_large - dec_small < 128 * 1024
    assert max(enc_large, dec_large) < 32 * 1024 * 1024
