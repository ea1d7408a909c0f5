"""encrypt/decrypt of a whole payload in memory go to the engine in steps
(agefast.payload.steps, of rules.MEMORY_STEP chunks), each once its part of the result is faulted in:
the steps must join into one STREAM and keep every payload check."""

import io
import random

import pytest

import agefast
from agefast.payload import rules
from agefast.errors import PayloadError

IDENTITY = agefast.x25519.Identity.generate()
STEP = rules.MEMORY_STEP
SEALED = 65552


@pytest.fixture(scope="module")
def payload():
    data = random.Random(7).randbytes(2 * STEP * 65536 + 1000)     # three steps, the last one short
    return data, agefast.encrypt(data, [IDENTITY.to_public()])


def test_steps_join_into_one_stream(payload):
    data, sealed = payload
    assert agefast.decrypt(sealed, [IDENTITY], threads=1) == data
    # Another reader of the format agrees: the streaming decryptor, which never goes in steps.
    assert agefast.decryptor(io.BytesIO(sealed), [IDENTITY]).read() == data


@pytest.mark.parametrize("chunk", [0, STEP - 1, STEP, 2 * STEP])
def test_a_damaged_chunk_in_any_step_fails_the_call(payload, chunk):
    data, sealed = payload
    header = len(sealed) - (len(data) + 16 * (2 * STEP + 1))
    damaged = bytearray(sealed)
    damaged[header + chunk * SEALED + 100] ^= 1
    with pytest.raises(PayloadError, match=f"chunk {chunk}"):
        agefast.decrypt(bytes(damaged), [IDENTITY])


@pytest.mark.parametrize("cut", [STEP, 2 * STEP])
def test_a_payload_cut_at_a_step_boundary_has_no_final_chunk(payload, cut):
    data, sealed = payload
    header = len(sealed) - (len(data) + 16 * (2 * STEP + 1))
    with pytest.raises(PayloadError, match="without a final chunk"):
        agefast.decrypt(sealed[:header + cut * SEALED], [IDENTITY])


def test_data_after_a_final_chunk_in_an_earlier_step(payload):
    # A file of one full final chunk, followed by more chunks.
    data, sealed = payload
    one = agefast.encrypt(data[:65536], [IDENTITY.to_public()])
    header = len(sealed) - (len(data) + 16 * (2 * STEP + 1))
    with pytest.raises(PayloadError, match="trailing data"):
        agefast.decrypt(one + sealed[header + SEALED:], [IDENTITY])
