"""encrypt_into / decrypt_into: age files into the caller's buffer."""

import gc
import io
import random

import pyrage
import pytest

import agefast
from agefast.errors import PayloadError

CHUNK = 64 * 1024
IDENTITY = agefast.x25519.Identity.generate()
RECIPIENT = IDENTITY.to_public()
SENTINEL = 0xA5


def plaintext(n: int) -> bytes:
    return random.Random(n).randbytes(n)


@pytest.mark.parametrize("n", [0, 1, CHUNK, CHUNK + 1, 17 * CHUNK + 5])
@pytest.mark.parametrize("threads", [1, 2])
def test_round_trip_leaves_the_rest_of_buf_alone(n, threads):
    data = plaintext(n)
    sealed = bytearray([SENTINEL]) * (n + 4096)
    size = agefast.encrypt_into(data, [RECIPIENT], sealed, threads=threads)
    assert size == len(agefast.encrypt(data, [RECIPIENT]))
    assert sealed[size:] == bytearray([SENTINEL]) * (len(sealed) - size)
    # another implementation reads it
    assert pyrage.decrypt(bytes(sealed[:size]), [pyrage.x25519.Identity.from_str(str(IDENTITY))]) == data
    opened = bytearray([SENTINEL]) * (n + 10)
    assert agefast.decrypt_into(memoryview(sealed)[:size], [IDENTITY], opened, threads=threads) == n
    assert opened[:n] == data and opened[n:] == bytearray([SENTINEL]) * 10


@pytest.mark.parametrize("engine", ["numba", "cryptography"])
def test_a_failed_chunk_leaves_only_the_verified_prefix(engine, engine_setting):
    # The kernels open a range on two threads: the chunks after a failed one kept their plaintext in the
    # caller's buffer, of a file that was refused. Damaged at chunk 5 of 64, into buf and through a decryptor.
    engine_setting(engine)
    data = plaintext(64 * CHUNK)
    sealed = bytearray(agefast.encrypt(data, [RECIPIENT]))
    sealed[len(sealed) - 64 * (CHUNK + 16) + 5 * (CHUNK + 16) + 3] ^= 1
    into = bytearray([SENTINEL]) * len(data)
    with pytest.raises(PayloadError, match="chunk 5"):
        agefast.decrypt_into(sealed, [IDENTITY], into, threads=2)
    read = bytearray([SENTINEL]) * len(data)
    with agefast.decryptor(io.BytesIO(sealed), [IDENTITY], threads=2) as reader:
        with pytest.raises(PayloadError, match="chunk 5"):
            while reader.readinto(memoryview(read)[reader.tell():]):
                pass
    for buf in (into, read):
        assert buf[:5 * CHUNK] == data[:5 * CHUNK]
        assert not any(buf[i * CHUNK:(i + 1) * CHUNK] == data[i * CHUNK:(i + 1) * CHUNK] for i in range(5, 64))


def test_short_buffers_are_refused_before_anything_is_written():
    data = plaintext(3 * CHUNK)
    sealed = agefast.encrypt(data, [RECIPIENT])
    short = bytearray([SENTINEL]) * (len(sealed) - 1)
    with pytest.raises(ValueError, match=f"at least {len(sealed)} bytes"):
        agefast.encrypt_into(data, [RECIPIENT], short)
    assert short == bytearray([SENTINEL]) * len(short)
    short = bytearray([SENTINEL]) * (len(data) - 1)
    with pytest.raises(ValueError, match=f"at least {len(data)} bytes"):
        agefast.decrypt_into(sealed, [IDENTITY], short)
    assert short == bytearray([SENTINEL]) * len(short)


def test_read_only_buffers_are_refused():
    with pytest.raises(TypeError):
        agefast.encrypt_into(b"x", [RECIPIENT], bytes(1000))
    with pytest.raises(TypeError):
        agefast.decrypt_into(agefast.encrypt(b"x", [RECIPIENT]), [IDENTITY], bytes(10))


def test_armored_files_decrypt_into_a_buffer():
    data = plaintext(2 * CHUNK + 3)
    armored = agefast.encrypt(data, [RECIPIENT], armored=True)
    out = bytearray(len(data) + 1)
    assert agefast.decrypt_into(armored, [IDENTITY], out) == len(data) and out[:len(data)] == data
    with pytest.raises(ValueError, match="too small"):
        agefast.decrypt_into(armored, [IDENTITY], bytearray(len(data) - 1))


def test_a_corrupt_chunk_leaves_only_verified_plaintext():
    data = plaintext(3 * CHUNK)
    sealed = bytearray(agefast.encrypt(data, [RECIPIENT]))
    sealed[-CHUNK // 2] ^= 1  # inside the last chunk
    out = bytearray([SENTINEL]) * len(data)
    with pytest.raises(PayloadError):
        agefast.decrypt_into(sealed, [IDENTITY], out)
    assert out[:2 * CHUNK] == data[:2 * CHUNK]
    # The failed chunk's part is untouched, or wiped where OpenSSL wrote before its tag check.
    assert set(out[2 * CHUNK:]) <= {0, SENTINEL}


def test_a_header_longer_than_the_first_buffered_bytes():
    # decrypt copies the start of the file at once (MemorySource, 4 KiB); a
    # longer header, here 50 stanzas, is read on from a longer copy.
    identities = [agefast.x25519.Identity.generate() for _ in range(50)]
    data = plaintext(1000)
    sealed = agefast.encrypt(data, [i.to_public() for i in identities])
    assert len(sealed) - len(data) > 4096 + 32
    assert agefast.decrypt(sealed, [identities[-1]]) == data
    opened = bytearray(len(data))
    assert agefast.decrypt_into(sealed, [identities[-1]], opened) == len(data) and opened == data
    assert pyrage.decrypt(sealed, [pyrage.x25519.Identity.from_str(str(identities[-1]))]) == data


def test_a_failed_decrypt_into_leaves_the_buffer_free_at_once():
    # The error, its traceback and the frame that raised it held each other, and with them a view of buf: a
    # bytearray could not be resized until the garbage collector ran (found by this session's third probe).
    identity = agefast.x25519.Identity.generate()
    sealed = bytearray(agefast.encrypt(bytes(100_000), [identity.to_public()]))
    sealed[-1] ^= 1
    buf = bytearray(200_000)
    gc_was = gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(agefast.errors.PayloadError):
            agefast.decrypt_into(bytes(sealed), [identity], buf)
        buf.clear()
    finally:
        if gc_was:
            gc.enable()


@pytest.mark.parametrize("n", [100, 3 * CHUNK])
def test_buffers_that_overlap_the_input_are_refused_before_anything_is_written(n):
    # Sealing over plaintext not yet read gave a file of other plaintext; opening in place a false PayloadError.
    whole = bytearray(plaintext(n)) + bytearray([SENTINEL]) * (2 * n + 4096)
    view = memoryview(whole)
    before = bytes(whole)
    for buf in (view[n // 2:], view[:n // 2 + len(agefast.encrypt(b"", [RECIPIENT])) + 16], whole):
        with pytest.raises(ValueError, match="buf must not overlap plaintext"):
            agefast.encrypt_into(view[:n], [RECIPIENT], buf)
        with pytest.raises(ValueError, match="buf must not overlap plaintext"):
            agefast.encrypt_into(view[:n].toreadonly(), [RECIPIENT], buf)
    assert whole == before
    sealed = agefast.encrypt(plaintext(n), [RECIPIENT])
    whole[:len(sealed)] = sealed
    before = bytes(whole)
    for buf in (whole, view[len(sealed) - 1:]):
        with pytest.raises(ValueError, match="buf must not overlap ciphertext"):
            agefast.decrypt_into(view[:len(sealed)], [IDENTITY], buf, threads=2)
    assert whole == before
    # next to each other is not overlapping
    assert agefast.decrypt_into(view[:len(sealed)], [IDENTITY], view[len(sealed):]) == n
    assert whole[len(sealed):len(sealed) + n] == plaintext(n)
