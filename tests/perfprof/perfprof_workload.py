"""CPU work for the perfprof tests (also pasted into inner pytester sessions)."""

import time


def spin(seconds):
    # CPU time of this thread, not wall time: task-clock counts the former,
    # and other processes on a busy machine would widen the gap.
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
