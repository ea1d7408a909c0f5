"""Batch buffers kept from one job to the next (agefast.io.batch_buffers): taken again, bounded, and never a way
for one job's bytes into another's output."""

import os
import random
import threading

import pytest

import agefast
from agefast import api, kernels
from agefast.io import batch_buffers
from agefast.payload.rules import CHUNK_SIZE, PIPELINE_BATCH, SEALED_CHUNK_SIZE

IDENTITY = agefast.x25519.Identity.generate()
RECIPIENT = IDENTITY.to_public()
GRANULE = 64 << 10
BATCH = PIPELINE_BATCH * CHUNK_SIZE


@pytest.fixture
def made(monkeypatch):
    """No buffer kept when the test starts; the sizes of the buffers it makes new."""
    monkeypatch.setattr(batch_buffers, "_kept", [])
    sizes = []
    real = batch_buffers.anonymous_memory

    def counted(size):
        sizes.append(size)
        return real(size)

    monkeypatch.setattr(batch_buffers, "anonymous_memory", counted)
    return sizes


def test_a_buffer_given_back_is_taken_again(made):
    first = batch_buffers.take(100)
    assert len(first) == GRANULE
    batch_buffers.give_back(first)
    assert batch_buffers.take(GRANULE) is first
    assert made == [GRANULE]


def test_a_kept_buffer_too_small_for_the_size_asked_is_not_handed_out(made):
    batch_buffers.give_back(batch_buffers.take(1))
    large = batch_buffers.take(GRANULE + 1)
    assert len(large) == 2 * GRANULE and batch_buffers._kept == []


def test_at_most_kept_buffers_are_kept(made):
    for buffer in [batch_buffers.take(1) for _ in range(batch_buffers.KEPT + 3)]:
        batch_buffers.give_back(buffer)
    assert len(batch_buffers._kept) == batch_buffers.KEPT


def test_every_size_a_job_asks_for_is_one_size():
    # a batch in and out, plain and sealed, the pipeline's with the byte that tells whether it is the last, each
    # with a page for where it lies within one; the file kernel's
    asked = [PIPELINE_BATCH * CHUNK_SIZE + 1 + 4096, PIPELINE_BATCH * SEALED_CHUNK_SIZE + 4096,
             PIPELINE_BATCH * SEALED_CHUNK_SIZE + 1 + 4096, PIPELINE_BATCH * CHUNK_SIZE + 4096,
             kernels.FILE_BATCH * SEALED_CHUNK_SIZE + 4096]
    assert len({-(-size // GRANULE) * GRANULE for size in asked}) == 1


def test_the_next_job_takes_the_buffers_the_last_one_gave_back(tmp_path, made, monkeypatch):
    monkeypatch.setattr(api, "SMALL_FILE", 0)    # through the pipeline however small
    (tmp_path / "plain").write_bytes(os.urandom(3 * BATCH + 5))
    agefast.encrypt_file(tmp_path / "plain", tmp_path / "sealed", [RECIPIENT], threads=2)
    assert len(made) == 4       # an input and an output buffer for each of the two workers
    agefast.decrypt_file(tmp_path / "sealed", tmp_path / "out", [IDENTITY], threads=2)
    agefast.encrypt_file(tmp_path / "plain", tmp_path / "again", [RECIPIENT], threads=2)
    assert len(made) == 4 and len(batch_buffers._kept) == 4
    assert (tmp_path / "out").read_bytes() == (tmp_path / "plain").read_bytes()


# Every size ends in a part of a batch or a chunk, which a buffer's old bytes would fill out.
@pytest.mark.parametrize("size", [BATCH + 1, 2 * BATCH + CHUNK_SIZE - 1, 5 * BATCH + 3 * CHUNK_SIZE + 12345])
@pytest.mark.parametrize("threads", [1, 2])
def test_what_a_kept_buffer_held_never_reaches_an_output(tmp_path, monkeypatch, old_batch_buffers, size,
                                                        threads):
    monkeypatch.setattr(api, "SMALL_FILE", 0)
    data = random.Random(size).randbytes(size)
    (tmp_path / "plain").write_bytes(data)
    old_batch_buffers(0xA5)
    agefast.encrypt_file(tmp_path / "plain", tmp_path / "sealed", [RECIPIENT], threads=threads)
    old_batch_buffers(0x5A)
    agefast.decrypt_file(tmp_path / "sealed", tmp_path / "out", [IDENTITY], threads=threads)
    assert (tmp_path / "out").read_bytes() == data
    # cryptography's own decryption of the file the kept buffers were in
    assert agefast.decrypt((tmp_path / "sealed").read_bytes(), [IDENTITY]) == data


def test_jobs_on_several_threads_at_once_never_share_a_buffer(tmp_path, monkeypatch, old_batch_buffers):
    monkeypatch.setattr(api, "SMALL_FILE", 0)
    old_batch_buffers(0xA5)
    failures = []

    def round_trips(n: int) -> None:
        try:
            data = random.Random(n).randbytes(2 * BATCH + n * 4099)
            plain, sealed, out = (tmp_path / f"{name}{n}" for name in ("plain", "sealed", "out"))
            plain.write_bytes(data)
            for _ in range(3):
                agefast.encrypt_file(plain, sealed, [RECIPIENT], threads=2)
                agefast.decrypt_file(sealed, out, [IDENTITY], threads=2)
                if out.read_bytes() != data:
                    failures.append(n)
                sealed.unlink()
                out.unlink()
        except BaseException as e:
            failures.append(e)

    threads = [threading.Thread(target=round_trips, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(batch_buffers._kept) <= batch_buffers.KEPT + 2 * len(threads)    # a buffer past KEPT per worker at most
