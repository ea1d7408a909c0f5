"""File-to-file payloads whose whole batches go through the compiled file kernel (agefast.payload.file_driver)."""

import io
import os
import random

import pytest

import agefast
from agefast.payload import file_driver, rules
from agefast.payload.engine import ENGINE_AFTER, choose
from agefast import kernels
from agefast.errors import PayloadError, TruncatedError
from streams import interrupt_thread_start

MiB = 1 << 20
SIZE = ENGINE_AFTER + 3 * MiB + 17
IDENTITY = agefast.x25519.Identity.generate()
RECIPIENT = IDENTITY.to_public()
KEY = bytes(range(32))
SEALED_BATCH = kernels.FILE_BATCH * kernels.SEALED_CHUNK_SIZE


@pytest.fixture(scope="module", autouse=True)
def warm_cache():
    # The file kernel applies only where the kernels are in the cache (agefast.payload.engine.choose),
    # for this process and the commands it starts: fill it here if it is cold.
    kernels.warm_up()


@pytest.fixture
def kernel_calls(monkeypatch):
    """The batches each file-kernel job was started for, by direction."""
    calls = {"seal": [], "open": []}
    for direction in calls:
        real = getattr(kernels, f"{direction}_file")

        def spy(*args, real=real, direction=direction, **kwargs):
            calls[direction].append(args[5])
            return real(*args, **kwargs)

        monkeypatch.setattr(kernels, f"{direction}_file", spy)
    return calls


@pytest.mark.parametrize("prefix", [0, 4095])
def test_files_round_trip_through_the_kernel_from_any_offset(tmp_path, kernel_calls, old_batch_buffers, prefix):
    # in buffers an earlier job left full of other bytes, which must reach neither output
    old_batch_buffers(0xA5)
    data = random.Random(prefix).randbytes(SIZE)
    (tmp_path / "plain").write_bytes(b"p" * prefix + data)
    with open(tmp_path / "plain", "rb") as src, open(tmp_path / "sealed", "wb") as dst:
        src.seek(prefix)
        dst.write(b"s" * prefix)      # a writer that holds data of its own, not yet flushed
        agefast.encrypt_io(src, dst, [RECIPIENT])
    sealed = (tmp_path / "sealed").read_bytes()
    assert sealed[:prefix] == b"s" * prefix and agefast.decrypt(sealed[prefix:], [IDENTITY]) == data
    with open(tmp_path / "sealed", "rb") as src, open(tmp_path / "out", "wb") as dst:
        src.seek(prefix)
        dst.write(b"o" * prefix)
        agefast.decrypt_io(src, dst, [IDENTITY])
    assert (tmp_path / "out").read_bytes() == b"o" * prefix + data
    # every whole batch but the last went through the kernel, both ways
    assert kernel_calls == {"seal": [(SIZE - 1) // (32 * 65536)],
                            "open": [(rules.sealed_size(SIZE) - 1) // SEALED_BATCH]}


def test_they_do_not_apply_to_small_files_pipes_appends_or_other_file_objects(tmp_path, kernel_calls):
    data = bytes(SIZE)
    (tmp_path / "small").write_bytes(data[:ENGINE_AFTER - 1])
    (tmp_path / "plain").write_bytes(data)

    class Subclass(io.FileIO):
        pass

    for name, mode, opener in (("small", "wb", open), ("plain", "ab", open), ("plain", "wb", Subclass)):
        with opener(tmp_path / name, "rb") as src, open(tmp_path / "out", mode) as dst:
            agefast.encrypt_io(src, dst, [RECIPIENT])
    read, write = os.pipe()
    os.close(write)
    with open(read, "rb") as src, open(tmp_path / "out", "wb") as dst:
        agefast.encrypt_io(src, dst, [RECIPIENT])
    assert kernel_calls == {"seal": [], "open": []}


def corrupt(path, *chunks_):
    with open(path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        payload_at = size - rules.sealed_size(SIZE)
        for chunk in chunks_:
            # every bit of one ciphertext byte flipped: always a change, whatever the byte was
            at = payload_at + chunk * kernels.SEALED_CHUNK_SIZE + 100
            f.seek(at)
            byte = f.read(1)[0]
            f.seek(at)
            f.write(bytes([byte ^ 0xFF]))


@pytest.mark.parametrize("damaged", [(40,), (100, 70), (3, 300)])
def test_a_damaged_chunk_fails_as_the_pipeline_fails(tmp_path, engine_setting, kernel_calls, damaged):
    # The first damaged chunk in the file is the one named, as the pipeline
    # (on cryptography, which never uses the file kernel) names it, whichever
    # worker met which damage first; no output is left.
    data = random.Random(1).randbytes(SIZE)
    (tmp_path / "plain").write_bytes(data)
    agefast.encrypt_file(tmp_path / "plain", tmp_path / "sealed", [RECIPIENT])
    corrupt(tmp_path / "sealed", *damaged)
    with pytest.raises(PayloadError) as kernel:
        agefast.decrypt_file(tmp_path / "sealed", tmp_path / "out", [IDENTITY])
    assert kernel_calls["open"] and not (tmp_path / "out").exists()
    engine_setting("cryptography")
    with pytest.raises(PayloadError) as pipeline:
        agefast.decrypt_file(tmp_path / "sealed", tmp_path / "out", [IDENTITY])
    assert str(kernel.value) == str(pipeline.value) == f"failed to authenticate payload chunk {min(damaged)}"


def test_a_failure_leaves_what_the_output_held_past_the_verified_prefix(tmp_path, kernel_calls):
    # As `age -d < f.age 1<> out` leaves out: the verified prefix written over its start, the rest as it was.
    # Cutting back the workers' writes had cut out's own bytes too; where out has any, they are not used.
    data = random.Random(3).randbytes(SIZE)
    (tmp_path / "plain").write_bytes(data)
    agefast.encrypt_file(tmp_path / "plain", tmp_path / "sealed", [RECIPIENT])
    corrupt(tmp_path / "sealed", 300)
    old = random.Random(4).randbytes(SIZE + MiB)
    (tmp_path / "out").write_bytes(old)
    with open(tmp_path / "sealed", "rb") as src, open(tmp_path / "out", "r+b") as dst:
        with pytest.raises(PayloadError, match="chunk 300"):
            agefast.decrypt_io(src, dst, [IDENTITY])
    verified = 300 * kernels.CHUNK_SIZE
    assert (tmp_path / "out").read_bytes() == data[:verified] + old[verified:]
    assert kernel_calls["open"] == []
    # An output with nothing past where the payload goes still takes the workers (and is cut back).
    with open(tmp_path / "out", "r+b") as dst:
        dst.write(b"o" * 4095)
        dst.truncate()
        with open(tmp_path / "sealed", "rb") as src, pytest.raises(PayloadError, match="chunk 300"):
            agefast.decrypt_io(src, dst, [IDENTITY])
    assert (tmp_path / "out").read_bytes() == b"o" * 4095 + data[:verified]
    assert kernel_calls["open"]


def test_a_final_chunk_in_the_middle_is_trailing_data(tmp_path, kernel_calls):
    # Chunk 40 of 600 sealed as the final one: the payload goes on after it.
    plain = random.Random(2).randbytes(600 * kernels.CHUNK_SIZE)
    sealed = bytearray(600 * kernels.SEALED_CHUNK_SIZE)
    choose(None, None).seal(KEY, 0, plain[:40 * kernels.CHUNK_SIZE], sealed, False)
    choose(None, None).seal(KEY, 40, plain[40 * kernels.CHUNK_SIZE:41 * kernels.CHUNK_SIZE],
                            memoryview(sealed)[40 * kernels.SEALED_CHUNK_SIZE:], True)
    choose(None, None).seal(KEY, 41, plain[41 * kernels.CHUNK_SIZE:],
                            memoryview(sealed)[41 * kernels.SEALED_CHUNK_SIZE:], True)
    (tmp_path / "payload").write_bytes(sealed)
    with open(tmp_path / "payload", "rb") as src, open(tmp_path / "out", "wb") as dst:
        with pytest.raises(PayloadError, match="trailing data after the final chunk"):
            file_driver.open_payload(src, dst, KEY, choose(len(sealed), None), read_at=0, write_at=0,
                                     size=len(sealed))
    assert kernel_calls["open"]


@pytest.mark.parametrize("direction,error", [("seal", agefast.EncryptError), ("open", PayloadError)])
def test_an_input_that_shrank_under_the_workers_fails(tmp_path, monkeypatch, direction, error):
    real = kernels.FileJob.wait

    def shrank(self):
        real(self)
        raise EOFError("the input ended before its last batch")

    monkeypatch.setattr(kernels.FileJob, "wait", shrank)
    (tmp_path / "in").write_bytes(bytes(SIZE))
    move = file_driver.seal_payload if direction == "seal" else file_driver.open_payload
    with open(tmp_path / "in", "rb") as src, open(tmp_path / "out", "wb") as dst:
        with pytest.raises(error, match="shrank"):
            move(src, dst, KEY, choose(SIZE, None), read_at=0, write_at=0, size=SIZE)


def test_an_input_cut_back_to_where_the_workers_stopped_fails(tmp_path, monkeypatch):
    # Cut back to the end of the last whole batch while the workers sealed, the input left the rest nothing to
    # read: an empty final chunk was sealed after 16,384 full ones, exit 0 and a file no one could decrypt.
    real = kernels.FileJob.wait
    batch = kernels.FILE_BATCH * rules.CHUNK_SIZE
    whole = (SIZE - 1) // batch * batch

    def cut(self):
        result = real(self)
        os.truncate(tmp_path / "in", whole)
        return result

    monkeypatch.setattr(kernels.FileJob, "wait", cut)
    (tmp_path / "in").write_bytes(bytes(SIZE))
    with open(tmp_path / "in", "rb") as src, open(tmp_path / "out", "wb") as dst:
        with pytest.raises(agefast.EncryptError, match="the input file shrank while it was encrypted"):
            file_driver.seal_payload(src, dst, KEY, choose(SIZE, None), read_at=0, write_at=0, size=SIZE)


def test_a_sealed_input_cut_back_to_where_the_workers_stopped_is_cut_short(tmp_path, monkeypatch):
    # The opening twin of the test above: cut back to the end of the last whole batch while the workers opened
    # it, the file is one whose middle chunks end it (age: "unexpected EOF"), never a whole one.
    plain = random.Random(3).randbytes(SIZE)
    sealed = bytearray(rules.sealed_size(SIZE))
    choose(None, None).seal(KEY, 0, plain, sealed, True)
    (tmp_path / "in").write_bytes(sealed)
    whole = (len(sealed) - 1) // SEALED_BATCH * SEALED_BATCH
    real = kernels.FileJob.wait

    def cut(self):
        result = real(self)
        os.truncate(tmp_path / "in", whole)
        return result

    monkeypatch.setattr(kernels.FileJob, "wait", cut)
    with open(tmp_path / "in", "rb") as src, open(tmp_path / "out", "wb") as dst:
        with pytest.raises(TruncatedError):
            file_driver.open_payload(src, dst, KEY, choose(len(sealed), None), read_at=0, write_at=0,
                                     size=len(sealed))


def test_a_signal_while_the_workers_start_leaves_the_verified_prefix(tmp_path, monkeypatch):
    # KeyboardInterrupt inside Thread.start (which waits for the thread): the job was never returned to be
    # stopped, its first worker wrote on out of order, and the output had holes of zeros.
    plain = random.Random(9).randbytes(SIZE)
    (tmp_path / "plain").write_bytes(plain)
    with open(tmp_path / "plain", "rb") as src, open(tmp_path / "sealed", "wb") as dst:
        file_driver.seal_payload(src, dst, KEY, choose(SIZE, 2), read_at=0, write_at=0, size=SIZE)
    started = interrupt_thread_start(monkeypatch, "agefast-file-job", 1)
    sealed = (tmp_path / "sealed").stat().st_size
    # The output stays open after the exception, as a command's redirected stdout does until it exits.
    with open(tmp_path / "sealed", "rb") as src, open(tmp_path / "out", "wb") as dst:
        with pytest.raises(KeyboardInterrupt):
            file_driver.open_payload(src, dst, KEY, choose(sealed, 2), read_at=0, write_at=0, size=sealed)
        for thread in started:
            thread.join()
        out = (tmp_path / "out").read_bytes()
    assert plain.startswith(out)
