"""The compile's IR-only mode (_build._ir_only): Numba's libraries get no machine code inside it, and Numba works as before after it."""

import numpy as np
from numba import cfunc, njit, types

from agefast.kernels import _build


def test_libraries_made_inside_have_no_machine_code_and_numba_jits_after():
    def add(a, b):
        return a + b

    with _build._ir_only():
        inside = cfunc(types.int64(types.int64, types.int64))(add)
    assert isinstance(inside._library, _build._IRLibrary) and inside.address == 0
    assert not inside._library.get_function(inside.native_name).is_declaration     # finalized: its IR is there

    after = njit(lambda a: a.sum() + 1)        # the JIT again: compiled, run, and right
    assert after(np.arange(5, dtype=np.int64)) == 11
    assert cfunc(types.int64(types.int64, types.int64))(add).ctypes(2, 3) == 5
