"""The agefast-inspect command: what an age file is, without a key (as age-inspect).

    agefast-inspect [--json] [INPUT]

It reads the header (through the armor, if any) and the file's size, and
tells the recipient stanza types, whether the file is post-quantum, armored,
and how its bytes divide into header, armor, encryption overhead and payload.
Nothing is decrypted, so the payload size assumes the file decrypts. The
text and the JSON are age-inspect's, field for field.
"""

import json
import os
import stat
import sys
from typing import Any

from . import files, goflag, outcome
from .output import STDOUT_NAME
from ..errors import AgeError, ArmorError, HeaderError, go_quote
from ..io.source import Source
from ..format.armor import ArmorReader, starts_armored
from ..format.grammar import encode_mac_line, parse_header
from ..payload.rules import NONCE_SIZE, TAG_SIZE, chunk_count, end_problem

VERSION = "age-encryption.org/v1"
USAGE = """\
Usage:
    agefast-inspect [--json] [INPUT]

Options:
    --json                      Output machine-readable JSON.

INPUT defaults to standard input. "-" may be used as INPUT to explicitly
read from standard input."""

# Stanza types that make a file breakable by a quantum computer, and those
# that don't, as age-inspect lists them; any other leaves the answer
# "unknown". age-inspect names the tagged recipients by their HPKE labels
# ("age-encryption.org/p256tag"), not by the stanza types they write
# ("p256tag"), so it says "unknown" of their files too: said here as it says it.
CLASSICAL = frozenset({"X25519", "ssh-rsa", "ssh-ed25519", "age-encryption.org/p256tag", "piv-p256"})
POSTQUANTUM = frozenset({"mlkem768x25519", "scrypt", "age-encryption.org/mlkem768p256tag"})


class InspectError(AgeError):
    """The input is not an age file whose layout can be told."""


class _Counting:
    """Passes reads through, counting the bytes (the file's size as stored)."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self.count = 0

    def readinto(self, b: memoryview) -> int | None:
        n: int | None = self._reader.readinto(b)
        self.count += n or 0
        return n


def _read_to_end(source: Source) -> int:
    buffer = bytearray(1 << 20)
    total = 0
    while n := source.readinto(buffer):
        total += n
    return total


def stream_overhead(payload_size: int) -> int:
    """The nonce and tags in a payload of `payload_size` bytes; InspectError if no payload has that size."""
    if payload_size < NONCE_SIZE:
        raise InspectError(f"failed to compute stream overhead: encrypted size too small: {payload_size}")
    sealed = payload_size - NONCE_SIZE
    if end_problem(sealed) is not None:
        raise InspectError(f"failed to compute stream overhead: invalid encrypted payload size: {sealed}")
    return NONCE_SIZE + chunk_count(sealed) * TAG_SIZE


def inspect(reader: Any, file_size: int | None = None) -> dict[str, Any]:
    """age-inspect's metadata of the age file read from `reader` (with `readinto`).

    `file_size`, if known (a regular file), spares reading past the header
    of a binary file.
    """
    raw = _Counting(reader)
    source = Source(raw)
    armored = starts_armored(source)
    if armored:
        source = Source(ArmorReader(source))
    try:
        header = parse_header(source, require_stanzas=False)
    except HeaderError as e:
        raise InspectError(f"failed to read header: {e}") from None
    header_size = len(header.mac_input) + len(encode_mac_line(header.mac))
    armor_size = 0
    if file_size is None or armored:
        # An armored file's size on disk depends on its line endings; the
        # decoded size is what the payload is.
        try:
            file_size = header_size + _read_to_end(source)
        except ArmorError as e:
            raise InspectError(f"failed to read rest of file: {e}") from None
        armor_size = raw.count - file_size
    overhead = stream_overhead(file_size - header_size)
    types = [s.type for s in header.stanzas]
    postquantum = "unknown"
    for t in types:
        if t in CLASSICAL:
            postquantum = "no"
        elif t in POSTQUANTUM and postquantum != "no":
            postquantum = "yes"
    payload = file_size - header_size - overhead
    return {
        "version": VERSION,
        "postquantum": postquantum,
        "armor": armored,
        "stanza_types": types or None,      # Go's nil slice: null where there are none
        "sizes": {"header": header_size, "armor": armor_size, "overhead": overhead,
                  "min_payload": payload, "max_payload": payload, "min_padding": 0, "max_padding": 0},
    }


def describe(name: str, data: dict[str, Any]) -> str:
    """age-inspect's text report."""
    sizes = data["sizes"]
    lines = [f"{name} is an age file, version {go_quote(data['version'])}.", ""]
    if data["armor"]:
        lines += ["This file is ASCII-armored.", ""]
    lines.append("This file is encrypted to the following recipient types:")
    lines += [f"  - {go_quote(t)}" for t in data["stanza_types"] or ()]
    lines.append("")
    if data["postquantum"] == "yes":
        lines += ["This file uses post-quantum encryption.", ""]
    elif data["postquantum"] == "no":
        lines += ["This file does NOT use post-quantum encryption.", ""]
    lines += ["Size breakdown (assuming it decrypts successfully):", ""]
    lines.append(f"    Header              {sizes['header']:12d} bytes")
    if data["armor"]:
        lines.append(f"    Armor overhead      {sizes['armor']:12d} bytes")
    lines.append(f"    Encryption overhead {sizes['overhead']:12d} bytes")
    lines.append(f"    Payload             {sizes['min_payload']:12d} bytes")
    lines.append("                        -------------------")
    total = sizes["header"] + sizes["overhead"] + sizes["min_payload"] + sizes["armor"]
    lines.append(f"    Total               {total:12d} bytes")
    lines += ["", "Tip: for machine-readable output, use --json."]
    return "\n".join(lines) + "\n"


def _flags() -> goflag.FlagSet:
    f = goflag.FlagSet()
    f.bool("version", "version")
    f.bool("json", "json")
    return f


_GO_HTML_ESCAPES = str.maketrans({c: f"\\u{ord(c):04x}" for c in "<>&"})


def _error(message: str) -> int:
    print(f"agefast-inspect: error: {message}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    return outcome.run_cleaning_up(_run, sys.argv[1:] if argv is None else argv)


def _run(argv: list[str]) -> int:
    parsed, status = goflag.parse_command(_flags(), argv, USAGE)
    if parsed is None:
        return status
    values, positional = parsed
    if len(positional) > 1:
        print(USAGE, file=sys.stderr)
        return 1
    # As age-inspect: no INPUT, or an empty one, is standard input, named "<stdin>" ("-" keeps its name)
    given = positional[0] if positional else ""
    name = given or "-"
    try:
        if name == "-":
            data = inspect(sys.stdin.buffer)
        else:
            try:
                with files.named("input file", name):
                    f = open(name, "rb")
            except files.FileFailed as e:
                return _error(outcome.describe(e))
            with f:
                st = os.fstat(f.fileno())
                data = inspect(f, st.st_size if stat.S_ISREG(st.st_mode) else None)
    except AgeError as e:
        return _error(f"inspection failed: {e}")
    except OSError as e:
        return _error(f"inspection failed: {e.strerror or e}")
    if values["json"]:
        # Go's json.Encoder with SetIndent("", "    "): the same text, ending in a newline, "<", ">" and "&"
        # escaped (its SetEscapeHTML, on by default; stanza types are ASCII, and JSON's syntax has none of them).
        text = json.dumps(data, indent=4).translate(_GO_HTML_ESCAPES) + "\n"
    else:
        text = describe(given or "<stdin>", data)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as e:
        # One line naming /dev/stdout, as the other commands' (`agefast-inspect f | head`, a full disk)
        outcome.stdout_to_null()
        return _error(outcome.describe(files.FileFailed("write", "output file", STDOUT_NAME, e)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
