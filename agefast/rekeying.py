"""Re-keying: an age file's payload under a new header, for new recipients.

The file key is recovered from the old header, whose MAC must match it, and
wrapped for the new recipients under a new header MAC; the payload (its nonce
and chunks) is copied byte for byte, neither decrypted nor encrypted again.

What it does not do: the file key stays the same, so anyone who could
decrypt the file before and kept its file key, or a copy of the old file,
still can. Taking a reader's access away needs the file encrypted anew.

Nothing of the payload is checked, only the header: a damaged or truncated
payload is copied as it is, and fails to decrypt in the new file where it
failed in the old one. Checking it would mean reading every chunk into
memory, the cost that copying in the kernel spares.
"""

import errno
import os
from collections.abc import Iterable
from typing import Any

from . import _arguments
from .format import armor
from .io.copy import copy_rest
from .io.replace import replacing
from .io.reserve import positional_fd
from .io.source import Source
from ._typing import Identity, Reader, Recipient, StrPath, Writer
from .errors import EncryptError
from .header import make_header, open_file_key
from .io.writes import flush, write_all


class OpenedFile:
    """An age file whose file key was recovered; `source` is at its payload."""

    def __init__(self, source: Source, armored: bool, file_key: bytes, payload_at: tuple[int, int] | None,
                 opened_as: tuple[int, tuple[int, ...]] | None) -> None:
        self.source = source
        self.armored = armored
        self.file_key = file_key
        # (descriptor, offset) of the payload in a regular binary file.
        self.payload_at = payload_at
        # (descriptor, version) of a regular file as it was opened (see _version).
        self.opened_as = opened_as


def open_file(src: Reader, identities: Iterable[Identity]) -> OpenedFile:
    """Read the header of the age file `src`, binary or armored, and recover
    its file key with `identities` (errors as decrypt's)."""
    identities = _arguments.identities(identities)
    # Only a standard file object's offsets are the file's (a GzipFile's are
    # not), so only from one is the payload copied by offset.
    src_fd = positional_fd(_arguments.reader("src", src))
    # Any regular file, appended to or not (or where the system cannot say: positional_fd needs to know).
    st = _arguments.regular_file(src)
    opened_as = None if st is None else (getattr(src, "fileno")(), _version(st))
    start: int = 0 if src_fd is None else getattr(src, "tell")()
    source = Source(src)
    armored = armor.starts_armored(source)
    if armored:
        source = Source(armor.ArmorReader(source))
    file_key = open_file_key(source, identities)
    payload_at = None if armored or src_fd is None else (src_fd, start + source.consumed)
    return OpenedFile(source, armored, file_key, payload_at, opened_as)


def _version(st: os.stat_result) -> tuple[int, ...]:
    """What changes when a file's bytes do (its times to the kernel's clock tick)."""
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns


def new_header(opened: OpenedFile, recipients: Iterable[Recipient]) -> bytes:
    """The header wrapping the file key of `opened` for exactly `recipients`.

    Recipient sets age refuses (a passphrase beside anything, post-quantum
    beside classic recipients) raise EncryptError, as in encryption."""
    return make_header(_arguments.recipients(recipients), opened.file_key)[0]


def write_file(opened: OpenedFile, header: bytes, dst: Writer, *, durable: bool = False) -> None:
    """Write `header` and the payload of `opened` onto `dst`, armored if the input was.

    EncryptError if the input is a regular file that changed meanwhile (a
    writer still at work on it): the copy may hold half of what it wrote, and
    in place, the rename would drop what it writes next. `durable`: `dst` is
    synced before the input is looked at, as it must be where it is to
    replace a file that may be the input (replacing(durable=True))."""
    out: Any = armor.ArmorWriter(dst) if opened.armored else dst
    write_all(out, header)
    copy_rest(opened.source, out, opened.payload_at)
    if opened.armored:
        out.close()
    flush(dst)
    if opened.opened_as is None:
        return
    if durable:
        # The sync of a large result takes long, and a write to the input during it would be lost by the rename
        # that follows (the rename's own sync then has nothing to do).
        _sync(dst)
    if _version(os.fstat(opened.opened_as[0])) != opened.opened_as[1]:
        raise EncryptError("the input changed while it was re-keyed: left as it is")


def _sync(dst: Writer) -> None:
    """fsync the file under `dst`, where there is one; its failure (EIO, ENOSPC) is raised: the kernel tells a
    writeback error once, and the sync before the rename would then find nothing wrong."""
    try:
        fd = dst.fileno()   # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):   # no file under it (a BytesIO)
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.EROFS, errno.ENOTSUP):     # a pipe, a socket: nothing to sync
            raise


def rekey_io(src: Reader, dst: Writer, identities: Iterable[Identity], recipients: Iterable[Recipient]) -> None:
    """Write the age file `src` onto `dst` with its header made anew for
    exactly `recipients`, once `identities` open it; the payload is copied,
    not encrypted again (see `rekey` for what that leaves readable).

    Armored input gives armored output. Nothing is written before the header
    is opened and the new one made."""
    _arguments.writer("dst", dst)
    checked = _arguments.recipients(recipients)
    _arguments.distinct_files(src, dst)
    opened = open_file(src, identities)
    write_file(opened, new_header(opened, checked), dst)


def rekey(infile: StrPath, outfile: StrPath, identities: Iterable[Identity],
          recipients: Iterable[Recipient]) -> None:
    """Re-key the age file `infile` for exactly `recipients` into `outfile`,
    which may be `infile`, and is replaced only on success.

    `identities` must open the file: its file key is recovered, checked
    against the header MAC, and wrapped for `recipients` in a new header;
    the payload is copied byte for byte (in the kernel, between regular
    files), binary or armored as it was. Nothing of the payload is checked.

    The file key does not change: whoever could decrypt the file before and
    kept its file key, or a copy of the old file, still can. To take access
    away, decrypt and encrypt the file anew.

    EncryptError if `infile` changes while it is copied (a writer still at
    work on it): the copy is dropped and `infile` left as it is.
    """
    source = _arguments.path("infile", infile)
    target = _arguments.path("outfile", outfile)
    checked_identities = _arguments.identities(identities)
    checked_recipients = _arguments.recipients(recipients)
    with open(source, "rb") as src:
        opened = open_file(src, checked_identities)
        header = new_header(opened, checked_recipients)
        with replacing(target, durable=True) as dst:    # in place, the file it replaces is the only copy
            write_file(opened, header, dst, durable=True)
