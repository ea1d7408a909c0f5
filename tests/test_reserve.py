"""agefast.io.reserve: an output file's blocks allocated before it is written,
its size and bytes unchanged by it, and what the output did not fill given back."""

import io
import os
import random

import pytest

import agefast
from agefast import api
from agefast.io import reserve
from agefast.payload import rules

BATCH = rules.PIPELINE_BATCH * 64 * 1024
IDENTITY = agefast.x25519.Identity.generate()
RECIPIENT = IDENTITY.to_public()
MiB = 1 << 20


def allocated(path) -> int:
    return os.stat(path).st_blocks * 512


@pytest.fixture
def small_reserve(monkeypatch):
    """Reserve outputs from 1 MiB on, so that the tests' files are small; the *_file functions take them through
    the file driver, as files from RESERVE_FROM on are (the smaller ones go whole through memory: api.SMALL_FILE)."""
    monkeypatch.setattr(reserve, "RESERVE_FROM", MiB)
    monkeypatch.setattr(api, "SMALL_FILE", 0)


@pytest.fixture
def reservable(tmp_path, small_reserve):
    """tmp_path, where the file system reserves blocks (skip where it cannot)."""
    with open(tmp_path / "probe", "wb") as f:
        if reserve.reserve(f, 0, 2 * MiB) is None:
            pytest.skip("fallocate(2) reserves nothing here (not Linux, or a file system without it)")
    os.unlink(tmp_path / "probe")
    return tmp_path


def test_a_reservation_allocates_without_changing_the_file(reservable):
    path = reservable / "f"
    with open(path, "wb") as f:
        f.write(b"head")
        f.flush()
        end = reserve.reserve(f, 4, 8 * MiB)
        assert end == 4 + 8 * MiB
        assert os.path.getsize(path) == 4 and allocated(path) >= 8 * MiB
    assert path.read_bytes() == b"head"


def test_release_gives_back_what_the_output_did_not_fill(reservable):
    path = reservable / "f"
    with open(path, "wb") as f:
        end = reserve.reserve(f, 0, 8 * MiB)
        f.write(b"z" * MiB)
        f.flush()
        reserve.release(f, end)
    assert path.read_bytes() == b"z" * MiB and allocated(path) < 2 * MiB


def test_release_keeps_a_file_longer_than_the_reservation(reservable):
    path = reservable / "f"
    data = random.Random(1).randbytes(5 * MiB)
    path.write_bytes(data)
    with open(path, "r+b") as f:
        end = reserve.reserve(f, 0, 2 * MiB)
        reserve.release(f, end)
    assert path.read_bytes() == data


@pytest.mark.parametrize("kind", ["memory", "no file", "pipe"])
def test_only_files_are_reserved(kind, small_reserve):
    if kind == "pipe":
        r, w = os.pipe()
        with os.fdopen(r, "rb"), os.fdopen(w, "wb") as writer:
            assert reserve.reserve(writer, 0, 4 * MiB) is None
        return
    writer = io.BytesIO() if kind == "memory" else None
    assert reserve.reserve(writer, 0, 4 * MiB) is None
    reserve.release(writer, 10)   # nothing to give back, and no error


def test_a_file_is_reserved_only_at_a_known_offset_for_a_large_output(tmp_path, small_reserve):
    with open(tmp_path / "f", "wb") as f:
        assert reserve.reserve(f, None, 4 * MiB) is None
        assert reserve.reserve(f, 0, MiB - 1) is None
    with open(tmp_path / "f", "ab") as f:   # a file others may append to too
        assert reserve.reserve(f, 0, 4 * MiB) is None


def test_encrypt_and_decrypt_files_leave_nothing_reserved(reservable):
    data = random.Random(2).randbytes(3 * BATCH + 4321)
    (reservable / "plain").write_bytes(data)
    agefast.encrypt_file(reservable / "plain", reservable / "sealed", [RECIPIENT])
    agefast.decrypt_file(reservable / "sealed", reservable / "out", [IDENTITY])
    assert (reservable / "out").read_bytes() == data
    for name in ("sealed", "out"):
        size = os.path.getsize(reservable / name)
        assert allocated(reservable / name) < size + MiB, name


def test_a_failed_decryption_keeps_only_the_verified_prefix_and_no_reservation(reservable):
    data = random.Random(3).randbytes(4 * BATCH)
    ct = bytearray(agefast.encrypt(data, [RECIPIENT]))
    bad_chunk = 2 * rules.PIPELINE_BATCH + 1
    ct[len(ct) - len(data) - 16 * (4 * rules.PIPELINE_BATCH) + bad_chunk * 65552 + 9] ^= 1
    (reservable / "sealed").write_bytes(ct)
    with open(reservable / "sealed", "rb") as src, open(reservable / "out", "wb") as dst:
        with pytest.raises(agefast.errors.PayloadError, match=f"chunk {bad_chunk}"):
            agefast.decrypt_io(src, dst, [IDENTITY])
    out = (reservable / "out").read_bytes()
    assert out == data[:bad_chunk * 65536]
    assert allocated(reservable / "out") < len(out) + MiB


def test_file_outputs_reserve_exactly_what_they_will_fill(tmp_path, small_reserve, monkeypatch):
    calls = []
    real = reserve.reserve

    def recording(writer, at, size):
        calls.append((at, size))
        return real(writer, at, size)

    monkeypatch.setattr(reserve, "reserve", recording)
    data = random.Random(4).randbytes(2 * BATCH + 99)
    (tmp_path / "plain").write_bytes(data)
    agefast.encrypt_file(tmp_path / "plain", tmp_path / "sealed", [RECIPIENT])
    sealed_size = os.path.getsize(tmp_path / "sealed")
    agefast.decrypt_file(tmp_path / "sealed", tmp_path / "out", [IDENTITY])
    [(at, size), opened] = calls
    assert at + size == sealed_size and 0 < at < 400   # from the end of the header and nonce
    assert opened == (0, len(data))


def test_a_libc_without_fallocate_reserves_nothing(tmp_path, small_reserve, monkeypatch):
    monkeypatch.setattr(reserve, "_fallocate", False)   # as found where libc has none
    with open(tmp_path / "f", "wb") as f:
        assert reserve.reserve(f, 0, 4 * MiB) is None


def test_a_failed_release_fails_nothing(reservable, monkeypatch):
    # The blocks stay allocated then, but the stream's outcome is its own.
    def refuse(fd, size):
        raise PermissionError(1, "Operation not permitted")

    with open(reservable / "f", "wb") as f:
        end = reserve.reserve(f, 0, 4 * MiB)
        f.write(b"q" * 1000)
        f.flush()
        monkeypatch.setattr(reserve.os, "ftruncate", refuse)
        reserve.release(f, end)
    assert (reservable / "f").read_bytes() == b"q" * 1000
