"""encrypt_file and decrypt_file of a small file: read whole and done in memory (agefast.api.SMALL_FILE), a
larger one, or one that grows while it is read, through the file driver."""

import os
import random

import pytest

import agefast
from agefast import api
from agefast.errors import PayloadError

IDENTITY = agefast.x25519.Identity.generate()
RECIPIENT = IDENTITY.to_public()


@pytest.fixture
def driven(monkeypatch):
    """The directions ("encrypt", "decrypt") of each *_file call that went through encrypt_io / decrypt_io."""
    calls = []
    for direction in ("encrypt", "decrypt"):
        real = getattr(api, f"{direction}_io")

        def spy(*args, real=real, direction=direction, **kwargs):
            calls.append(direction)
            return real(*args, **kwargs)

        monkeypatch.setattr(api, f"{direction}_io", spy)
    return calls


@pytest.mark.parametrize("armored", [False, True])
def test_a_file_up_to_small_file_is_done_in_memory_and_a_larger_one_by_the_driver(tmp_path, monkeypatch, driven,
                                                                                   armored):
    monkeypatch.setattr(api, "SMALL_FILE", 1000)
    for size, way in ((1000, []), (1001, ["encrypt"])):
        data = os.urandom(size)
        (tmp_path / "plain").write_bytes(data)
        agefast.encrypt_file(tmp_path / "plain", tmp_path / "sealed", [RECIPIENT], armored)
        assert driven == way and agefast.decrypt((tmp_path / "sealed").read_bytes(), [IDENTITY]) == data
        driven.clear()
    sealed = (tmp_path / "sealed").stat().st_size
    for limit, way in ((sealed, []), (sealed - 1, ["decrypt"])):
        monkeypatch.setattr(api, "SMALL_FILE", limit)
        agefast.decrypt_file(tmp_path / "sealed", tmp_path / "out", [IDENTITY])
        assert driven == way and (tmp_path / "out").read_bytes() == data
        driven.clear()


def test_a_file_that_grew_after_its_size_was_taken_is_read_by_the_driver_from_its_start(tmp_path, monkeypatch,
                                                                                        driven):
    data = os.urandom(5000)
    (tmp_path / "plain").write_bytes(data)
    real = os.fstat

    def fstat_before_it_grew(fd):
        st = real(fd)
        if st.st_size != len(data):
            return st
        fields = list(st)
        fields[6] = 3000    # st_size, as it was when taken
        return os.stat_result(fields)

    monkeypatch.setattr(os, "fstat", fstat_before_it_grew)
    agefast.encrypt_file(tmp_path / "plain", tmp_path / "sealed", [RECIPIENT])
    monkeypatch.setattr(os, "fstat", real)
    assert driven == ["encrypt"] and agefast.decrypt((tmp_path / "sealed").read_bytes(), [IDENTITY]) == data


def test_a_damaged_small_file_leaves_no_output(tmp_path, driven):
    (tmp_path / "plain").write_bytes(os.urandom(70000))     # two chunks: the first verifies
    agefast.encrypt_file(tmp_path / "plain", tmp_path / "sealed", [RECIPIENT])
    sealed = bytearray((tmp_path / "sealed").read_bytes())
    sealed[-10] ^= 1
    (tmp_path / "sealed").write_bytes(sealed)
    (tmp_path / "old").write_bytes(b"kept")
    for out in ("out", "old"):
        with pytest.raises(PayloadError, match="chunk 1"):
            agefast.decrypt_file(tmp_path / "sealed", tmp_path / out, [IDENTITY])
    assert not (tmp_path / "out").exists() and (tmp_path / "old").read_bytes() == b"kept" and driven == []


def _damaged(rng, sealed: bytes) -> bytes:
    """`sealed` cut short, with a bit flipped, a byte added or taken out, or data after it."""
    b, at = bytearray(sealed), rng.randrange(len(sealed))
    how = rng.randrange(5)
    if how == 0:
        return bytes(b[:at])
    if how == 1:
        b[at] ^= 1 << rng.randrange(8)
    elif how == 2:
        b[at:at] = bytes([rng.choice(b"\n\r -=A")])
    elif how == 3:
        del b[at]
    else:
        b += b"\n" * rng.randrange(1, 4)
    return bytes(b)


def _outcome(tmp_path, armored):
    try:
        agefast.decrypt_file(tmp_path / "in", tmp_path / "out", [IDENTITY], armored=armored)
    except Exception as e:
        return type(e), str(e), (tmp_path / "out").exists()
    return (tmp_path / "out").read_bytes()


@pytest.mark.parametrize("armored", [None, True, False])
def test_a_file_fails_whole_as_it_fails_through_the_driver(tmp_path, monkeypatch, armored):
    # The same error, in the same words, and no output, whichever way a damaged file went.
    rng = random.Random(7)
    for size in (0, 100, 65536, 65537, 200000):
        for armor in (False, True):
            sealed = agefast.encrypt(rng.randbytes(size), [RECIPIENT], armor)
            for damaged in [sealed] + [_damaged(rng, sealed) for _ in range(8)]:
                (tmp_path / "in").write_bytes(damaged)
                outcomes = []
                for limit in (api.SMALL_FILE, 0):
                    monkeypatch.setattr(api, "SMALL_FILE", limit)
                    outcomes.append(_outcome(tmp_path, armored))
                    if (tmp_path / "out").exists():
                        (tmp_path / "out").unlink()
                assert outcomes[0] == outcomes[1]
