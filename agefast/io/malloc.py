"""Keep the memory the command frees, instead of faulting it in again.

glibc hands blocks of 128 KiB and more back to the kernel when they are freed
(its mmap and trim thresholds), so a loop that allocates and frees buffers of
a megabyte, as the armor codec's base64 steps do for every block, faults all
their pages in again on every round. On the project's VM a fault is dear
(free page reporting gives freed pages to the host): decoding 256 MiB of
armor took 1.40 s and 305,000 page faults with glibc's defaults, 0.28 s and
5,000 faults with the settings below.

This is a policy for a whole process, so only the agefast command asks for
it (keep_freed_memory()), and it takes effect at the first stream longer than
a batch (large_job()): small files never pay the 2 ms of importing ctypes. A
program using the library keeps its own allocator settings.
"""

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks up to this size come from the heap and stay there once freed ...
MMAP_THRESHOLD = 32 << 20
# ... and the heap keeps up to this much free memory before shrinking.
TRIM_THRESHOLD = 64 << 20

_wanted = False
_done = False


def keep_freed_memory() -> None:
    """Make this process keep freed memory once it works on a large stream."""
    global _wanted
    _wanted = True


def large_job() -> None:
    """A stream longer than a batch starts: apply the setting, if it was asked for."""
    global _done
    if not _wanted or _done:
        return
    _done = True
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return  # not glibc: that allocator's own policy stays
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
