"""O_DIRECT files: byte-exact through the aligned buffer, with fallback."""

import random

import pytest

import agefast
from agefast.io.direct import BLOCK, DirectReader, DirectWriter
from dev_mode import nothing_ignored

SIZES = [0, 1, 4095, 4096, 4097, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 12345]


@pytest.mark.parametrize("size", SIZES)
def test_writer_and_reader_round_trip(tmp_path, size):
    data = random.Random(size).randbytes(size)
    path = tmp_path / "f"
    rng = random.Random(1)
    with DirectWriter(path) as w:
        pos = 0
        while pos < size:
            step = rng.choice([1, 100, 4096, BLOCK - 3, BLOCK + 5])
            w.write(data[pos:pos + step])
            pos += step
    assert path.read_bytes() == data
    for offset in (0, 1, 4095, 4097, size // 2):
        got = bytearray()
        with DirectReader(path, offset) as r:
            while chunk := r.read(rng.choice([1, 7, 4096, BLOCK, 3 * BLOCK])):
                got += chunk
        assert got == data[offset:]


def test_writer_of_a_descriptor_turns_direct_io_on_as_one_of_a_path(tmp_path):
    # agefast.io.replace hands its file without a name over as a descriptor.
    import os

    from agefast.io import portable

    data = random.Random(3).randbytes(BLOCK + 12345)
    with DirectWriter(tmp_path / "by-path") as by_path:
        direct = by_path.direct
    fd = os.open(tmp_path / "by-fd", os.O_WRONLY | os.O_CREAT, 0o600)
    with DirectWriter(fd) as w:
        assert w.direct == direct
        flags = portable.file_status_flags(fd)      # None where there is no fcntl (and no O_DIRECT)
        assert flags is None or bool(flags & getattr(os, "O_DIRECT", 0)) == direct
        w.write(data)
    assert (tmp_path / "by-fd").read_bytes() == data
    with pytest.raises(OSError):
        os.fstat(fd)    # the writer owned it


def test_file_functions_with_direct_io(tmp_path):
    identity = agefast.x25519.Identity.generate()
    data = random.Random(2).randbytes(3 * BLOCK + 777)
    (tmp_path / "plain").write_bytes(data)
    agefast.encrypt_file(tmp_path / "plain", tmp_path / "ct", [identity.to_public()], direct=True)
    assert agefast.decrypt((tmp_path / "ct").read_bytes(), [identity]) == data
    agefast.decrypt_file(tmp_path / "ct", tmp_path / "back", [identity], direct=True)
    assert (tmp_path / "back").read_bytes() == data


@pytest.mark.parametrize("function", ["encrypt_file", "decrypt_file"])
@pytest.mark.parametrize("direct", [1, None, "yes"])
def test_direct_is_a_bool(function, direct, tmp_path):
    # As `armored`: 1 or "yes" had been taken as True, and None as False.
    (tmp_path / "in").write_bytes(b"x")
    key = agefast.x25519.Identity.generate()
    keys = [key.to_public()] if function == "encrypt_file" else [key]
    with pytest.raises(TypeError, match="argument 'direct': expected a bool"):
        getattr(agefast, function)(tmp_path / "in", tmp_path / "out", keys, direct=direct)
    assert not (tmp_path / "out").exists()


def test_failed_decryption_leaves_no_output(tmp_path):
    identity = agefast.x25519.Identity.generate()
    ct = bytearray(agefast.encrypt(bytes(3 * BLOCK), [identity.to_public()]))
    ct[-100] ^= 1
    (tmp_path / "ct").write_bytes(ct)
    for direct in (False, True):
        with pytest.raises(agefast.errors.PayloadError):
            agefast.decrypt_file(tmp_path / "ct", tmp_path / "out", [identity], direct=direct)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ct"]


def test_a_file_that_does_not_open_leaves_the_finaliser_nothing_to_close():
    # IOBase's finaliser closes even a reader or writer whose __init__
    # raised; close() then found no descriptor (AttributeError, printed as
    # "Exception ignored").
    nothing_ignored("import gc\n"
                    "from agefast.io.direct import DirectReader, DirectWriter\n"
                    "for make in (DirectReader, DirectWriter):\n"
                    "    try:\n"
                    "        make('/nonexistent/agefast-test')\n"
                    "    except FileNotFoundError:\n"
                    "        pass\n"
                    "gc.collect()\n")


@pytest.mark.parametrize("size", [BLOCK // 2, 3 * BLOCK + 5])    # failing in close() (the tail), or in a write
def test_a_full_disk_is_an_oserror_naming_the_output(tmp_path, monkeypatch, size):
    # It had been "BufferError: cannot close exported pointers exist": the failed write's traceback held a
    # view of the writer's buffer as it was closed.
    import errno
    import os

    import agefast.io.direct as direct

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    (tmp_path / "plain").write_bytes(random.Random(1).randbytes(size))
    identity = agefast.x25519.Identity.generate()
    monkeypatch.setattr(direct.os, "write", full)
    with pytest.raises(OSError) as raised:
        agefast.encrypt_file(tmp_path / "plain", tmp_path / "out", [identity.to_public()], direct=True)
    assert type(raised.value) is OSError and raised.value.errno == errno.ENOSPC
    assert raised.value.filename == str(tmp_path / "out") and not (tmp_path / "out").exists()
