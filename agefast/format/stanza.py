"""One recipient stanza and its encoding: `-> type args...` and a base64 body wrapped at 64 columns.

A leaf module, apart from the grammar that parses stanzas (grammar.py): the
public types (agefast._typing) name Stanza, and what they import must not
import them back.
"""

import binascii

STANZA_PREFIX = b"-> "
COLUMNS = 64


# Plain classes rather than dataclasses: importing dataclasses (and inspect
# with it) took 10 ms of every command's start.
class Stanza:
    """One recipient stanza: `-> type args...` and a binary body."""

    __slots__ = ("type", "args", "body")

    def __init__(self, type: str, args: list[str] | None = None, body: bytes = b""):
        self.type = type
        self.args = [] if args is None else args
        self.body = body

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Stanza):
            return NotImplemented
        return (self.type, self.args, self.body) == (other.type, other.args, other.body)

    def __repr__(self) -> str:
        return f"Stanza(type={self.type!r}, args={self.args!r}, body={self.body!r})"

    def encode(self) -> bytes:
        text = b64encode_bytes(self.body)
        # Whole lines of COLUMNS, then always a short one (empty if need be).
        short = len(text) - len(text) % COLUMNS
        lines = [text[i:i + COLUMNS] for i in range(0, short, COLUMNS)]
        lines.append(text[short:])
        arguments = " ".join([self.type, *self.args]).encode("ascii")
        return b"%s%s\n%s\n" % (STANZA_PREFIX, arguments, b"\n".join(lines))


def b64encode_bytes(data: bytes) -> bytes:
    return binascii.b2a_base64(data, newline=False).rstrip(b"=")


def b64encode(data: bytes) -> str:
    return b64encode_bytes(data).decode("ascii")
