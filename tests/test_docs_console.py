"""The command-line examples of docs/cli.md run as written.

Every `$ ` line of its ```console blocks runs in bash, in order, in one
fresh directory holding the files the examples name (notes.txt,
photo.jpg), with the installed commands first on PATH; each must exit 0.
Examples that need a terminal are written as {code-block} directives, which
the page shows and this test leaves alone.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sysconfig

import pytest

CLI_PAGE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "cli.md"


def console_commands(text: str) -> list[str]:
    blocks = re.findall(r"^```console\n(.*?)^```$", text, re.S | re.M)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


def test_the_page_has_examples_to_run():
    commands = console_commands(CLI_PAGE.read_text())
    assert any(c.startswith("agefast -d") for c in commands) and any(c.startswith("agefast-keygen") for c in commands)


def test_cli_examples_run(tmp_path):
    commands = console_commands(CLI_PAGE.read_text())
    if any(c.startswith("ssh-keygen") for c in commands) and shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed (apt-get install openssh-client)")
    (tmp_path / "notes.txt").write_text("notes\n")
    (tmp_path / "photo.jpg").write_bytes(os.urandom(100_000))
    env = {**os.environ, "PATH": sysconfig.get_path("scripts") + os.pathsep + os.environ.get("PATH", "")}
    for command in commands:
        result = subprocess.run(["bash", "-c", f"set -o pipefail; {command}"], cwd=tmp_path, env=env,
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"$ {command}\n{result.stderr}"
    assert (tmp_path / "photo-copy.jpg").read_bytes() == (tmp_path / "photo.jpg").read_bytes()
