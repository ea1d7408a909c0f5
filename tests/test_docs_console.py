"""The command-line examples of the guide (docs/index.md, docs/cli.md) run as written.

Every `$ ` line of their ```console blocks runs in bash, in order, in a
fresh directory holding the files the examples name (notes.txt,
photo.jpg), with the installed commands first on PATH; each must exit 0.
Examples that need a terminal are written as {code-block} directives, which
the page shows and this test leaves alone.
"""

import os
import pathlib
import re
import subprocess
import sysconfig

import pytest

from required import need_tools

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
PAGES = ("index.md", "cli.md")


def console_commands(text: str) -> list[str]:
    blocks = re.findall(r"^```console\n(.*?)^```$", text, re.S | re.M)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


@pytest.mark.parametrize("page", PAGES)
def test_the_page_has_examples_to_run(page):
    commands = console_commands((DOCS / page).read_text())
    assert any(c.startswith("agefast -d") for c in commands) and any(c.startswith("agefast-keygen") for c in commands)


@pytest.mark.parametrize("page", PAGES)
def test_console_examples_run(tmp_path, page):
    commands = console_commands((DOCS / page).read_text())
    if any(c.startswith("ssh-keygen") for c in commands):
        need_tools("ssh-keygen")
    (tmp_path / "notes.txt").write_text("notes\n")
    (tmp_path / "photo.jpg").write_bytes(os.urandom(100_000))
    env = {**os.environ, "PATH": sysconfig.get_path("scripts") + os.pathsep + os.environ.get("PATH", "")}
    for command in commands:
        result = subprocess.run(["bash", "-c", f"set -o pipefail; {command}"], cwd=tmp_path, env=env,
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"{page}: $ {command}\n{result.stderr}"
