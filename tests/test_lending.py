"""agefast.io.lending: buffers lent by address, and the overlap check of encrypt_into / decrypt_into."""

import ctypes

import pytest

from agefast.io import lending


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "read-only memoryview", "empty bytearray"])
def test_lent_buffer_is_the_object_and_held_until_released(kind):
    data = bytes(range(200)) if kind != "empty bytearray" else b""
    obj = {"bytes": data, "bytearray": bytearray(data), "empty bytearray": bytearray(),
           "memoryview": memoryview(bytearray(b"x" * 50 + data))[50:],
           "read-only memoryview": memoryview(data)}[kind]
    at, size, hold = lending.lend(obj, writable=False)
    assert size == len(data) and ctypes.string_at(at, size) == data
    if kind == "bytearray":
        with pytest.raises(BufferError):        # lent memory cannot move under the kernel
            obj.extend(b"more")
        lending.release(hold)
        obj.extend(b"more")                     # released: resizable again
    elif kind == "read-only memoryview":        # lent by PyObject_GetBuffer: the view holds an export
        with pytest.raises(BufferError):
            obj.release()
        lending.release(hold)
        obj.release()                           # the export ended with the lend
    else:
        lending.release(hold)


def test_only_writable_buffers_are_lent_for_writing():
    for obj in (b"immutable", memoryview(bytearray(8)).toreadonly()):
        with pytest.raises(BufferError):
            lending.lend(obj, writable=True)
    at, size, hold = lending.lend(bytearray(8), writable=True)
    assert size == 8 and at
    lending.release(hold)


def test_overlap_is_shared_memory_whatever_the_views():
    whole = bytearray(100)
    view = memoryview(whole)
    assert lending.overlap(view[:50], view[49:])
    assert lending.overlap(view[10:20], whole)
    assert lending.overlap(view[:50].toreadonly(), view[:1])
    assert lending.overlap(ctypes.c_char.from_buffer(whole, 30), view[30:31])   # another exporter, same memory
    assert not lending.overlap(view[:50], view[50:])
    assert not lending.overlap(view[:0], view)                                   # no byte to share
    assert not lending.overlap(bytes(100), whole)
    assert not lending.overlap(b"", b"")
