"""The CLI's progress bar: on stderr for large inputs at a terminal, else silent."""

import subprocess
import sys

from agefast.cli.progress import MIN_SIZE


def _commands(tmp_path, age_key, size):
    plain = tmp_path / "plain"
    plain.write_bytes(bytes(size))
    encrypt = [sys.executable, "-m", "agefast", "-r", age_key[1], "-o", tmp_path / "ct", plain]
    decrypt = [sys.executable, "-m", "agefast", "-d", "-i", age_key[0], "-o", tmp_path / "back",
               tmp_path / "ct"]
    return plain, encrypt, decrypt


def test_bar_for_a_large_input_at_a_terminal(tmp_path, age_key, tty_run):
    plain, encrypt, decrypt = _commands(tmp_path, age_key, MIN_SIZE + 1)
    for argv in (encrypt, decrypt):
        result = tty_run(argv)
        assert result.returncode == 0, result.transcript
        assert b"  0%|" in result.transcript and b"/32.0M" in result.transcript
    assert (tmp_path / "back").read_bytes() == plain.read_bytes()


def test_no_bar_when_stderr_is_not_a_terminal_or_the_input_is_small(tmp_path, age_key, tty_run):
    _, encrypt, _ = _commands(tmp_path, age_key, MIN_SIZE + 1)
    assert subprocess.run(encrypt, capture_output=True, check=True).stderr == b""
    _, encrypt, _ = _commands(tmp_path, age_key, MIN_SIZE - 1)
    result = tty_run(encrypt)
    assert result.returncode == 0 and result.transcript == b""
