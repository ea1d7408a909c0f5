"""Command-line flags parsed as Go's flag package parses them, as age's tools do.

So `-armor`, `--armor`, `-o FILE`, `-output=FILE` and `--output FILE` all
work, a bool flag never takes the next argument, parsing stops at the first
argument that is not a flag (or after `--`), and `-h`/`-help` ask for the
usage. Scripts written for `age` then mean the same with `agefast`;
argparse's prefix matching would read `-output x` as `-o utput x`.
"""

import sys
from collections.abc import Callable, Iterable
from typing import Any

from ..format.grammar import atoi


class FlagError(Exception):
    """The arguments don't parse; the message is Go's wording. Exit status 2."""


class HelpRequested(Exception):
    """-h or -help was given and is not a defined flag. Exit status 0."""


_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


class FlagSet:
    """Flags of three kinds: bools, strings (last one wins) and repeatable lists."""

    def __init__(self) -> None:
        # name: (dest, kind, tag or convert)
        self._flags: dict[str, tuple[str, str, Any]] = {}
        self._defaults: dict[str, Any] = {}

    def names(self) -> set[str]:
        """Every flag name this set accepts, without dashes; -h and -help come on top, as in Go."""
        return set(self._flags) | {"h", "help"}

    def bool(self, dest: str, *names: str) -> None:
        self._add(dest, names, "bool", False)

    def string(self, dest: str, *names: str, default: object = None,
               convert: Callable[[str], object] | None = None) -> None:
        """A flag with a value; `convert` turns the text into the value or raises ValueError."""
        self._add(dest, names, "string", default, convert)

    def repeated(self, dest: str, *names: str, tag: str | None = None) -> None:
        """A flag that may be given many times; with `tag`, values are kept as (tag, value)
        so that flags sharing `dest` keep their relative order (age's -i and -j)."""
        self._add(dest, names, "list", [], tag)

    def _add(self, dest: str, names: tuple[str, ...], kind: str, default: object, extra: object = None) -> None:
        for name in names:
            self._flags[name] = (dest, kind, extra)
        self._defaults.setdefault(dest, default)

    def parse(self, argv: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
        """(values by dest, the positional arguments)."""
        values = {dest: list(d) if isinstance(d, list) else d for dest, d in self._defaults.items()}
        args = list(argv)
        while args:
            arg = args[0]
            if len(arg) < 2 or arg[0] != "-":
                break
            dashes = 2 if arg[1] == "-" else 1
            if arg == "--":
                args.pop(0)
                break
            name = arg[dashes:]
            if not name or name[0] in "-=":
                raise FlagError(f"bad flag syntax: {arg}")
            args.pop(0)
            name, equals, value = name.partition("=")
            has_value = bool(equals)
            if name not in self._flags:
                if name in ("h", "help"):
                    raise HelpRequested()
                raise FlagError(f"flag provided but not defined: -{name}")
            dest, kind, extra = self._flags[name]
            if kind == "bool":
                if not has_value:
                    values[dest] = True
                elif value in _TRUE or value in _FALSE:
                    values[dest] = value in _TRUE
                else:
                    raise FlagError(f'invalid boolean value "{value}" for -{name}: parse error')
                continue
            if not has_value:
                if not args:
                    raise FlagError(f"flag needs an argument: -{name}")
                value = args.pop(0)
            if kind == "list":
                values[dest].append(value if extra is None else (extra, value))
                continue
            if extra is not None:
                try:
                    value = extra(value)
                except ValueError as e:
                    raise FlagError(f'invalid value "{value}" for flag -{name}: {e}') from None
            values[dest] = value
        return values, args


def positive_int(text: str) -> int:
    """The value of a flag that takes a count, as Go's strconv.Atoi reads a number (grammar.atoi); ValueError
    for anything else, or for less than 1."""
    try:
        value = atoi(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError("not a positive integer")
    return value


def parse_command(flags: FlagSet, argv: Iterable[str],
                  usage: str) -> tuple[tuple[dict[str, Any], list[str]] | None, int]:
    """((values, positional), 0), or (None, exit status) once the usage is printed.

    As a Go command with flag.ExitOnError: -h/-help print the usage to
    stderr and succeed; a flag that does not parse is named, then the usage,
    and the status is 2. A "version" flag prints the package's version.
    """
    try:
        values, positional = flags.parse(argv)
    except HelpRequested:
        print(usage, file=sys.stderr)
        return None, 0
    except FlagError as e:
        print(f"{e}\n{usage}", file=sys.stderr)
        return None, 2
    if values.get("version"):
        from importlib.metadata import version

        print(f"v{version('agefast')}")
        return None, 0
    return (values, positional), 0
