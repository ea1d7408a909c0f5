"""The agefast console script: it ends the process itself (os._exit), so
everything it printed must still arrive, and its exit status must be main's."""

import subprocess
import sys
from pathlib import Path

import agefast
from required import unavailable

SCRIPT = Path(sys.executable).with_name("agefast")
IDENTITY = agefast.x25519.Identity.generate()

if not SCRIPT.exists():
    unavailable(f"no agefast console script at {SCRIPT} (pip install -e .)")


def test_output_to_a_pipe_arrives_whole(tmp_path):
    data = bytes(range(256)) * 4096 + b"tail"
    done = subprocess.run([SCRIPT, "-r", str(IDENTITY.to_public()), "-a"], input=data, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(b"-----END AGE ENCRYPTED FILE-----\n")
    key = tmp_path / "key.txt"
    key.write_text(str(IDENTITY) + "\n")
    back = subprocess.run([SCRIPT, "-d", "-i", str(key)], input=done.stdout, capture_output=True)
    assert back.returncode == 0 and back.stdout == data


def test_failure_exit_status_and_message():
    done = subprocess.run([SCRIPT, "-d"], input=b"not an age file", capture_output=True)
    assert done.returncode == 1
    assert done.stderr.startswith(b"agefast: error: ") and done.stderr.endswith(b"\n")
