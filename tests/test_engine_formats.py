"""The format tests again, with every batch forced onto the Numba engine.

By default a one-shot process stays on cryptography (agefast.payload.engine), so the
stream, error and pipeline tests would not reach the engine on their own.
"""

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent


def test_stream_error_and_pipeline_tests_pass_on_the_engine():
    env = dict(os.environ, AGEFAST_ENGINE="numba")
    files = [str(TESTS / name) for name in ("test_stream.py", "test_errors.py", "test_pipeline.py",
                                            "test_seekable.py")]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
                          capture_output=True, text=True, env=env, cwd=TESTS.parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout.splitlines()[-1]
