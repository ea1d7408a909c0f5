"""The man pages document exactly the flags each command accepts.

The man pages are built from docs/man/*.md with Sphinx's man builder, as a
user's `man -l` would read them; the flags a command accepts are the ones
its `--help` lists. Both sides are sets of flag names, so the test does not
depend on how the parser is written.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
COMMANDS = ("agefast", "agefast-keygen", "agefast-inspect")

# A flag is a dash, or two, and a name, not inside a word ("ML-KEM-768",
# "agefast-keygen" and "post-quantum" are not flags).
FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")


@pytest.fixture(scope="module")
def man_dir(tmp_path_factory):
    pytest.importorskip("sphinx", reason="the man pages are built with Sphinx: pip install -e '.[docs]'")
    pytest.importorskip("myst_parser", reason="the man pages are Markdown, read by myst-parser: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("man")
    build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "man", str(DOCS), str(out)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    return out


def documented_flags(roff: str) -> set[str]:
    """The flags named by the items (.TP) of the OPTIONS section of a man page."""
    options = re.search(r"^\.SH OPTIONS\n(.*?)(?=^\.SH )", roff, re.S | re.M)
    assert options, "the man page has no OPTIONS section"
    terms = re.findall(r"^\.TP\n(.*)$", options.group(1), re.M)
    text = re.sub(r"\\f[BIRP]", "", "\n".join(terms)).replace("\\-", "-")
    return set(FLAG.findall(text))


def accepted_flags(command: str) -> set[str]:
    """The flags the installed command lists in its --help."""
    path = shutil.which(command, path=sysconfig.get_path("scripts") + os.pathsep + os.environ.get("PATH", ""))
    if path is None:
        pytest.skip(f"{command} is not installed (pip install -e .)")
    result = subprocess.run([path, "--help"], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    return set(FLAG.findall(result.stdout + result.stderr))


def test_flag_pattern_reads_flags_and_not_words():
    text = "-o, --output OUTPUT  with -pq, a post-quantum ML-KEM-768 key; see agefast-keygen -y, --warm-up"
    assert set(FLAG.findall(text)) == {"-o", "--output", "-pq", "-y", "--warm-up"}


@pytest.mark.parametrize("command", COMMANDS)
def test_man_page_documents_every_flag_the_command_accepts(man_dir, command):
    documented = documented_flags((man_dir / f"{command}.1").read_text())
    accepted = accepted_flags(command)
    assert accepted - documented == set(), f"{command} accepts flags its man page does not document"
    assert documented - accepted == set(), f"{command}(1) documents flags the command does not list in --help"


@pytest.mark.parametrize("command", COMMANDS)
def test_man_page_has_an_example(man_dir, command):
    roff = (man_dir / f"{command}.1").read_text()
    examples = re.search(r"^\.SH EXAMPLES\n(.*?)(?=^\.SH |\Z)", roff, re.S | re.M)
    assert examples and f"$ {command}".replace("-", "\\-") in examples.group(1)
