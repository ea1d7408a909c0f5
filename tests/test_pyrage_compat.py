"""pyrage compatibility: the same script on both libraries, the same API surface,
and each library opening the other's SSH files."""

import inspect
import os
import pathlib
import subprocess
import sys

import pyrage
import pytest
from ssh_keys import public_line, ssh_keys  # noqa: F401 (a fixture)
from test_plugin import on_path  # noqa: F401 (a fixture)

import agefast

SCRIPT = pathlib.Path(__file__).parent / "pyrage_script.py"
MODULES = ["x25519", "ssh", "passphrase", "plugin", "tag", "tagpq"]


def test_pyrage_script_gives_the_same_output(ssh_keys, on_path):
    outputs = {}
    for impl in ("pyrage", "agefast"):
        result = subprocess.run([sys.executable, SCRIPT, ssh_keys["ed25519"].parent], capture_output=True,
                                text=True, timeout=300, env={**os.environ, "PYRAGE_IMPL": impl})
        assert result.returncode == 0, result.stderr
        outputs[impl] = result.stdout
    assert outputs["agefast"] == outputs["pyrage"]
    assert "plugin round trip: b'plugged'" in outputs["agefast"]


def test_every_pyrage_name_exists():
    # pyrage.pyrage is its compiled extension module, not API.
    missing = [name for name in dir(pyrage)
               if not name.startswith("_") and name != "pyrage" and not hasattr(agefast, name)]
    for module in MODULES:
        theirs, ours = getattr(pyrage, module), getattr(agefast, module)
        for name in dir(theirs):
            if name.startswith("_"):
                continue
            if not hasattr(ours, name):
                missing.append(f"{module}.{name}")
            elif inspect.isclass(getattr(theirs, name)):
                missing += [f"{module}.{name}.{m}" for m in dir(getattr(theirs, name))
                            if not m.startswith("_") and not hasattr(getattr(ours, name), m)]
    assert missing == []


@pytest.mark.parametrize("key", ["ed25519", "rsa2048"])
def test_ssh_files_cross(key, ssh_keys, make_plaintext):
    plaintext = make_plaintext(200_000)
    line, private = public_line(ssh_keys[key]), ssh_keys[key].read_bytes()
    theirs = pyrage.encrypt(plaintext, [pyrage.ssh.Recipient.from_str(line)])
    assert agefast.decrypt(theirs, [agefast.ssh.Identity.from_buffer(private)]) == plaintext
    ours = agefast.encrypt(plaintext, [agefast.ssh.Recipient.from_str(line)])
    assert pyrage.decrypt(ours, [pyrage.ssh.Identity.from_buffer(private)]) == plaintext
