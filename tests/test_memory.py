"""Memory held by encryptor/decryptor does not grow with stream length.

Measured as the process's resident memory (Linux's peak RSS, VmHWM, reset
before each stream), not with tracemalloc: the pipeline's ring buffers are
mmap'd (agefast.payload.pipeline), which tracemalloc never sees. Each run is
a fresh interpreter (this file run as a script), so nothing the test runner
allocated or freed before is counted.
"""

import subprocess
import sys
from pathlib import Path

import agefast
from agefast import kernels
from agefast.payload.rules import CHUNK_SIZE, PIPELINE_BATCH, SEALED_CHUNK_SIZE
from streams import Sink

IDENTITY = agefast.x25519.Identity.generate()
RECIPIENT = IDENTITY.to_public()
BLOCK = bytes(range(256)) * 1024  # 256 KiB
MiB = 1 << 20
# Decrypting runs this many pipeline workers, each with one input and one
# output buffer of a batch (agefast.payload.pipeline), whatever the length.
WORKERS = 2
PIPELINE_BUFFERS = WORKERS * PIPELINE_BATCH * (SEALED_CHUNK_SIZE + CHUNK_SIZE)


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)


def peak_growth(job) -> int:
    """How far the resident memory rose above where it was while job() ran."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")        # VmHWM starts again from the current VmRSS (proc(5))
    before = _status("VmRSS")
    job()
    return _status("VmHWM") - before


def encrypting(blocks: int, path: Path):
    def job():
        with open(path, "wb") as f, agefast.encryptor(f, [RECIPIENT]) as w:
            for _ in range(blocks):
                w.write(BLOCK)
    return job


def decrypting(path: Path):
    def job():
        with open(path, "rb") as f:
            agefast.decrypt_io(f, Sink(), [IDENTITY], threads=WORKERS)
    return job


def measure(folder: Path) -> list[int]:
    """Peak growth encrypting 16 and 64 MiB, then decrypting them."""
    small, large = folder / "small.age", folder / "large.age"
    # A stream loads the kernels once it has moved 32 MiB, once per process,
    # and a cold cache compiles them (Numba's memory): done here first, so
    # that neither is counted against the streams measured.
    kernels.warm_up()
    peak_growth(encrypting(256, large))
    peak_growth(decrypting(large))
    # 16 MiB is enough to fill the pipeline's ring; 64 MiB only takes longer.
    return [peak_growth(encrypting(64, small)), peak_growth(encrypting(256, large)),
            peak_growth(decrypting(small)), peak_growth(decrypting(large))]


def test_streaming_memory_is_flat(tmp_path):
    done = subprocess.run([sys.executable, __file__, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    enc_small, enc_large, dec_small, dec_large = map(int, done.stdout.split())
    # The same fixed buffers serve any length. Resident memory moves by whole
    # pages as the allocator hands them back and takes them again: 1 MiB of slack.
    assert enc_large - enc_small < MiB, (enc_small, enc_large)
    # Decrypting is bounded by the workers' buffers, not compared with the
    # smaller stream: which of them a short stream touches is the scheduler's
    # choice (a busy CI machine left one worker's buffers untouched).
    assert max(dec_small, dec_large) < PIPELINE_BUFFERS + MiB, (dec_small, dec_large, PIPELINE_BUFFERS)
    assert enc_large < 32 * MiB


if __name__ == "__main__":
    print(*measure(Path(sys.argv[1])))
