"""The public encryption and decryption entry points, but the streaming objects (agefast.streaming).

`encrypt_io`, `decrypt_io` and the `*_file` functions run the whole payload
through the file driver (the file kernel, where it applies, and the
overlapped pipeline), and `encrypt`/`decrypt` of in-memory bytes hand the
whole payload to the engine in steps (agefast.payload.steps).
"""

import io
import os
from collections.abc import Callable, Iterable
from typing import IO

from . import _arguments
from .io import reserve
from .payload.engine import Engine, choose
from .format import armor
from .io.buffers import ready_now
from .io.replace import replacing
from .io.source import MemoryReader, MemorySource, file_position
from .io.direct import DirectReader
from .header import make_header, open_header
from .primitives import hmac_sha256
from .payload.file_driver import open_payload, seal_payload
from ._typing import Buffer, Identity, Reader, Recipient, StrPath, Writer
from .payload.rules import (CHUNK_SIZE, NONCE_SIZE, PIPELINE_BATCH, PIPELINE_FIRST, payload_key, plaintext_size,
                            sealed_size)
from .payload.steps import open_in_steps, open_whole, seal_in_steps, seal_whole
from .io.writes import flush, write_all
from .streaming import Decryptor, begin_file, encryptor, finish_file, open_file, write_position


def _sealing(plaintext: Buffer, recipients: Iterable[Recipient], threads: int | None) -> tuple[
        bytes, bytes, memoryview, Engine]:
    """Make the header now; return (header and payload nonce, payload key, plaintext, engine)."""
    data = _arguments.buffer("plaintext", plaintext)
    header, file_key = make_header(_arguments.recipients(recipients))
    nonce = os.urandom(NONCE_SIZE)
    key = payload_key(file_key, nonce, hmac_sha256)   # passed in: as header.open_header does
    return header + nonce, key, data, choose(len(data), threads)


def _opening(data: memoryview, identities: list[Identity], threads: int | None,
             armored: bool | None) -> tuple[bytes, memoryview, Engine] | None:
    """Open the header of a binary age file; return (payload key, payload
    after its nonce, engine), or None if the file is armored (its size is
    unknown until it is decoded). `identities` are checked (a list: a
    generator would be spent by the time an armored file's reader used it)."""
    source = MemorySource(data)
    armored = _arguments.armored_or_not(armored)
    if armored or (armored is None and armor.starts_armored(source)):
        return None
    return _open_binary(data, source, identities, threads)


def _open_binary(data: memoryview, source: MemorySource, identities: list[Identity],
                 threads: int | None) -> tuple[bytes, memoryview, Engine]:
    key = open_header(source, identities)
    payload = data[source.consumed:]
    return key, payload, choose(plaintext_size(len(payload)), threads)     # by the plaintext, as encrypt's


def _too_small(need: int) -> ValueError:
    return ValueError(f"buf must hold at least {need} bytes")


def encrypt(plaintext: Buffer, recipients: Iterable[Recipient], armored: bool = False, *,
            threads: int | None = None) -> bytes:
    """Encrypt bytes-like `plaintext` to `recipients`; returns the age file."""
    data = _arguments.buffer("plaintext", plaintext)
    armored = _arguments.flag("armored", armored)
    if armored and armor.encoded_size(sealed_size(len(data))) > armor.WHOLE_MAX:
        out = io.BytesIO()
        with encryptor(out, recipients, armored=True, threads=threads) as w:
            w.write(data)
        return out.getvalue()
    head, key, data, engine = _sealing(data, recipients, threads)
    sealed = seal_whole(engine, key, data, head)
    return armor.encode_whole(sealed) if armored else sealed


def encrypt_into(plaintext: Buffer, recipients: Iterable[Recipient], buf: Buffer, *,
                 threads: int | None = None) -> int:
    """Encrypt `plaintext` to `recipients` into the writable buffer `buf`;
    returns the length of the age file written at its start.

    As cryptography's encrypt_into: a caller who encrypts again and again
    reuses one buffer instead of faulting in a new result every time. `buf`
    must hold the header (its size depends on the recipients: one X25519
    recipient makes 184 bytes with the nonce) plus the sealed payload,
    len(plaintext) + 16 per 64 KiB chunk; a short one raises ValueError
    naming the size needed, before anything is written, as does a `buf`
    that shares memory with `plaintext`.
    """
    data = _arguments.buffer("plaintext", plaintext)
    view = _arguments.writable_buffer("buf", buf)
    _arguments.distinct_buffers("plaintext", plaintext, buf)
    head, key, data, engine = _sealing(data, recipients, threads)
    size = len(head) + sealed_size(len(data))
    if len(view) < size:
        raise _too_small(size)
    seal_in_steps(engine, key, data, view[:size], head, ready_now)
    return size


def decrypt(ciphertext: Buffer, identities: Iterable[Identity], *, armored: bool | None = None,
            threads: int | None = None) -> bytes:
    """Decrypt a whole age file held in memory; returns the plaintext.

    `armored` is as for Decryptor: None tells armor from binary by the start."""
    data = _arguments.buffer("ciphertext", ciphertext)
    checked = _arguments.identities(identities)
    opening = _opening(data, checked, threads, armored)
    if opening is None:
        binary = armor.decode_whole(data)
        if binary is None:
            return Decryptor(MemoryReader(data), checked, armored=True, threads=threads).readall()
        # Armor as a writer makes it cannot fail: the file fails as the stream would fail it.
        opening = _open_binary(memoryview(binary), MemorySource(binary), checked, threads)
    key, payload, engine = opening
    return open_whole(engine, key, payload)


def decrypt_into(ciphertext: Buffer, identities: Iterable[Identity], buf: Buffer, *,
                 armored: bool | None = None, threads: int | None = None) -> int:
    """Decrypt a whole age file held in memory into the writable buffer `buf`;
    returns the length of the plaintext written at its start.

    A binary file's plaintext size is known from its length: a short `buf`
    raises ValueError before anything is written, as does a `buf` that
    shares memory with `ciphertext` (no decryption in place). An armored file is decoded
    as it goes, so a `buf` it overflows holds verified plaintext when the
    ValueError comes. On a PayloadError `buf` holds the verified plaintext of
    the chunks before the failure, never anything unverified.
    """
    data = _arguments.buffer("ciphertext", ciphertext)
    view = _arguments.writable_buffer("buf", buf)
    _arguments.distinct_buffers("ciphertext", ciphertext, buf)
    checked = _arguments.identities(identities)
    opening = _opening(data, checked, threads, armored)
    if opening is None:
        reader = Decryptor(MemoryReader(data), checked, armored=True, threads=threads)
        n = 0
        got: int | None
        while n < len(view) and (got := reader.readinto(view[n:])):
            n += got
        if reader.read(1):
            raise ValueError("buf is too small for the plaintext")
        return n
    key, payload, engine = opening
    size = plaintext_size(len(payload))
    if len(view) < size:
        raise _too_small(size)
    open_in_steps(engine, key, payload, view[:size], ready_now)
    return size


def encrypt_io(reader: Reader, writer: Writer, recipients: Iterable[Recipient], armored: bool = False, *,
               threads: int | None = None) -> None:
    """Encrypt all of `reader` onto `writer`, reading, sealing and writing at once."""
    _arguments.reader("reader", reader)
    _arguments.writer("writer", writer)
    _arguments.distinct_files(reader, writer)
    out, key = begin_file(writer, recipients, armored)
    position = file_position(reader)
    write_at = write_position(out)
    read_at = size = None
    plain = 0
    if position is not None:
        read_at, plain = position[0], position[1] - position[0]
        size = sealed_size(plain)
    engine = choose(None if position is None else plain, threads)
    with reserve.reserving(out, write_at, size):
        seal_payload(reader, out, key, engine, read_at=read_at, write_at=write_at, size=plain)
        finish_file(out, writer)


def decrypt_io(reader: Reader, writer: Writer, identities: Iterable[Identity], *,
               armored: bool | None = None, threads: int | None = None) -> None:
    """Decrypt all of `reader` onto `writer` (`armored` as for Decryptor).

    Only verified plaintext is written, chunk after chunk, as age writes it:
    on a PayloadError `writer` holds, from where it was, the plaintext of
    every chunk before the first that failed, and nothing after it (a file
    is cut back to that). It is not the whole plaintext: discard it, or keep
    it knowing it is a prefix (decrypt_file keeps nothing).
    """
    _arguments.reader("reader", reader)
    _arguments.writer("writer", writer)
    _arguments.distinct_files(reader, writer)
    position = file_position(reader)
    source, key, armored = open_file(reader, identities, armored)
    offset = None
    write_at = write_position(writer)
    size = None
    payload = 0
    if position is not None and not armored:
        offset = position[0] + source.consumed
        payload = position[1] - offset
        size = plaintext_size(payload)
    engine = choose(size, threads)
    with reserve.reserving(writer, write_at, size):
        open_payload(reader, writer, key, engine, read_at=offset, write_at=write_at, size=payload,
                     fill=source.fill)
        flush(writer)


# A file up to this size is read whole and sealed or opened in memory, as encrypt() and decrypt() do, instead of
# through the file driver, whose pipeline pays for threads that a few batches do not repay (and for new batch
# buffers in a process's first job: agefast.io.batch_buffers). Up to here it has its first chunk and two batches,
# which two workers run beside each other however many cores there are: on 2 vCPUs (Zen 5, tmpfs, 2026-12-07:
# benchmarks/HISTORY.md) encrypt_file / decrypt_file of 1 KiB took 0.79-0.81x the time whole, 64 KiB 0.83-0.85x;
# with the batch buffers kept, files of 128 KiB to 4 MiB at random took 0.80-0.82x the time in all against the
# driver from 64 KiB, and 0.90x against the driver from 2 MiB; at 4 MiB the two ways take the same. Larger
# files give more cores a batch each, and a machine with more cores was not measured.
SMALL_FILE = (PIPELINE_FIRST + 2 * PIPELINE_BATCH) * CHUNK_SIZE


def _file_arguments(infile: StrPath, outfile: StrPath) -> tuple[str | bytes, str | bytes]:
    """The two paths, checked: TypeError for a non-path (an int would be
    taken for a file descriptor), SameFileError if they name one file."""
    src, dst = _arguments.path("infile", infile), _arguments.path("outfile", outfile)
    _arguments.distinct_paths(src, dst)
    return src, dst


def _whole_if_small(src: IO[bytes] | DirectReader) -> bytes | None:
    """All of `src` where it is a regular file of at most SMALL_FILE bytes, read with the page cache; else None,
    and `src` where it was."""
    st = None if isinstance(src, DirectReader) else _arguments.regular_file(src)
    if st is None or st.st_size > SMALL_FILE:
        return None
    data = src.read(st.st_size + 1)
    if len(data) > st.st_size:
        src.seek(0)     # it grew meanwhile: the file driver reads it as it comes
        return None
    return data


def _file_to_file(infile: str | bytes, outfile: str | bytes, direct: bool, in_memory: Callable[[bytes], bytes],
                  streamed: Callable[[Reader, Writer], None]) -> None:
    """`outfile`, whole or not at all, as in_memory(all of `infile`) where it is small (_whole_if_small),
    else as streamed(infile's file, outfile's) writes it."""
    with DirectReader(infile) if direct else open(infile, "rb") as src:
        small = _whole_if_small(src)
        with replacing(outfile, direct, in_place_if_refused=True) as dst:
            if small is None:
                streamed(src, dst)
            else:
                write_all(dst, in_memory(small))


def encrypt_file(infile: StrPath, outfile: StrPath, recipients: Iterable[Recipient], armored: bool = False, *,
                 threads: int | None = None, direct: bool = False) -> None:
    """Encrypt the file `infile` to `outfile`, which appears only on success.

    direct=True reads and writes with O_DIRECT, bypassing the page cache,
    where the file system allows it. Input and output naming one file (also
    through a symlink or a hard link) raise SameFileError before anything is
    written. An existing `outfile` in a folder that takes no new file, or
    that is a mount point (a file bind-mounted into a container), is written
    in place, as pyrage and age write it (agefast.io.replace).
    """
    source, target = _file_arguments(infile, outfile)
    checked = _arguments.recipients(recipients)
    _arguments.flag("armored", armored)
    _arguments.flag("direct", direct)
    _file_to_file(source, target, direct, lambda data: encrypt(data, checked, armored, threads=threads),
                  lambda src, dst: encrypt_io(src, dst, checked, armored, threads=threads))


def decrypt_file(infile: StrPath, outfile: StrPath, identities: Iterable[Identity], *,
                 armored: bool | None = None, threads: int | None = None, direct: bool = False) -> None:
    """Decrypt the file `infile` to `outfile`, which appears only on success.

    As in encrypt_file, one file as input and output raises SameFileError,
    and an `outfile` that cannot be replaced is written in place; `armored`
    is as for Decryptor."""
    source, target = _file_arguments(infile, outfile)
    checked = _arguments.identities(identities)
    _arguments.armored_or_not(armored)
    _arguments.flag("direct", direct)
    _file_to_file(source, target, direct, lambda data: decrypt(data, checked, armored=armored, threads=threads),
                  lambda src, dst: decrypt_io(src, dst, checked, armored=armored, threads=threads))
