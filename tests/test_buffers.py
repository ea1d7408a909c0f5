"""agefast._buffers.new_bytes: results written in place, huge pages asked for."""

import pytest

from agefast import _buffers

SIZES = [0, 1, _buffers._RAW_MIN - 1, _buffers._RAW_MIN, _buffers._RAW_MIN + 12345, 3 * _buffers._HUGE_PAGE + 7]


@pytest.mark.parametrize("size", SIZES)
def test_the_result_is_what_fill_wrote(size):
    pattern = bytes(range(251)) * (size // 251 + 1)
    views = []

    def fill(view):
        views.append(view)
        assert len(view) == size and not view.readonly
        view[:] = pattern[:size]

    result = _buffers.new_bytes(size, fill)
    assert type(result) is bytes and result == pattern[:size]
    with pytest.raises(ValueError):  # no writable alias of the bytes survives
        views[0][:1]


def test_a_failing_fill_propagates():
    def fill(view):
        raise OSError("source gone")

    with pytest.raises(OSError, match="source gone"):
        _buffers.new_bytes(_buffers._RAW_MIN * 2, fill)


def test_huge_pages_are_asked_for_on_the_aligned_part(monkeypatch):
    calls = []
    monkeypatch.setattr(_buffers, "_madvise", lambda start, size, advice: calls.append((start, size, advice)))
    huge = _buffers._HUGE_PAGE
    _buffers._advise_huge_pages(huge + 48, 4 * huge)
    assert calls == [(2 * huge, 3 * huge, _buffers._MADV_HUGEPAGE)]
    calls.clear()
    _buffers._advise_huge_pages(huge + 48, huge)  # no whole huge page inside
    assert calls == []
