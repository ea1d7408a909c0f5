"""The batch kernel against cryptography, one chunk at a time and several chunks per call (stitched where the
build is for AVX2 only)."""

import os
import random

from agefast.kernels import _common

from .parity import BATCHES, LENGTHS, check_batches, check_chunks

FUZZ = int(os.environ.get("AGEFAST_KERNEL_FUZZ", "150"))


def test_single_chunks_match_cryptography():
    assert check_chunks(random.Random(26), _common.STITCHED, random_lengths=FUZZ) == len(LENGTHS) + FUZZ


def test_batches_match_cryptography():
    assert check_batches(random.Random(27), _common.STITCHED) == len(BATCHES)
