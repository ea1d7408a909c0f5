"""The man pages document exactly the flags each command accepts.

The man pages are built from docs/man/*.md with Sphinx's man builder, as a
user's `man -l` would read them; the flags a command accepts are the ones
its parser defines (plus -h/-help, which Go's flag package, and so agefast's
front, accepts everywhere). Both sides are sets of flag names without their
dashes: as in Go, every flag takes one dash or two.
"""

import importlib
import pathlib
import re
import subprocess
import sys

import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
COMMANDS = ("agefast", "agefast-keygen", "agefast-inspect", "agefast-rekey", "agefast-tree")

# A flag is a dash, or two, and a name, not inside a word ("ML-KEM-768",
# "agefast-keygen" and "post-quantum" are not flags).
FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")


@pytest.fixture(scope="module")
def man_dir(tmp_path_factory):
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


PARSERS = {"agefast": "agefast.cli.age", "agefast-keygen": "agefast.cli.keygen", "agefast-inspect": "agefast.cli.inspect",
           "agefast-rekey": "agefast.cli.rekey", "agefast-tree": "agefast.cli.tree"}


def accepted_flags(command: str) -> set[str]:
    """The names of the flags the command's parser accepts."""
    return importlib.import_module(PARSERS[command])._flags().names()


def test_flag_pattern_reads_flags_and_not_words():
    text = "-o, --output OUTPUT  with -pq, a post-quantum ML-KEM-768 key; see agefast-keygen -y, --warm-up"
    assert set(FLAG.findall(text)) == {"-o", "--output", "-pq", "-y", "--warm-up"}


@pytest.mark.parametrize("command", COMMANDS)
def test_man_page_documents_every_flag_the_command_accepts(man_dir, command):
    documented = {flag.lstrip("-") for flag in documented_flags((man_dir / f"{command}.1").read_text())}
    accepted = accepted_flags(command)
    assert accepted - documented == set(), f"{command} accepts flags its man page does not document"
    assert documented - accepted == set(), f"{command}(1) documents flags the command does not list in --help"


@pytest.mark.parametrize("command", COMMANDS)
def test_man_page_has_an_example(man_dir, command):
    roff = (man_dir / f"{command}.1").read_text()
    examples = re.search(r"^\.SH EXAMPLES\n(.*?)(?=^\.SH |\Z)", roff, re.S | re.M)
    assert examples and f"$ {command}".replace("-", "\\-") in examples.group(1)
