"""The batch kernel one chunk at a time against cryptography (stitched where the build is for AVX2 only)."""

import os
import random

from agefast.kernels import _common

from .parity import LENGTHS, check_chunks

FUZZ = int(os.environ.get("AGEFAST_KERNEL_FUZZ", "150"))


def test_single_chunks_match_cryptography():
    assert check_chunks(random.Random(26), _common.STITCHED, random_lengths=FUZZ) == len(LENGTHS) + FUZZ
