"""Fixtures for the perfprof tests."""

import time

import pytest


def burn_cpu(seconds):
    # CPU time of this thread, not wall time: task-clock counts the former,
    # and other processes on a busy machine would widen the gap.
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@pytest.fixture
def spin():
    """A function spending `seconds` of the calling thread's CPU time."""
    return burn_cpu
