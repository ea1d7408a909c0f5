"""The file driver: a payload from a regular file to a regular file, its whole batches on the compiled file kernel.

Where a payload goes from a regular file to a regular file (encrypt_io and
decrypt_io, and so the `*_file` functions, and the command's head start),
seal_payload and open_payload move all of it: every whole batch of 32 chunks
but the last is sealed or opened by agefast.kernels.seal_file / open_file,
one worker per core that reads, seals or opens and writes batch after batch
in compiled code, with no Python and no GIL in between. The last batch,
which holds the final chunk, goes through agefast.payload.pipeline, which
knows how a payload ends, and so does whatever the input grew by meanwhile;
an input that shrank under the workers is an error. Where the file kernel
does not apply, the pipeline moves the whole payload.

However the workers end short (a chunk that does not verify, a failed read
or write, an exception in the caller), the output is left as age leaves it:
the plaintext (or ciphertext) of every chunk before the first one that
failed, and nothing after it. The workers write their batches in any order,
so batches past the failure may be written and earlier ones not yet: the
output is cut back to the batches known written (FileJob.written) and,
after a chunk that did not verify, the verified chunks of its batch before
it are written there.

In one process, 256 MiB page-cached file to file on the 2-core VM (AMD EPYC
Zen 5, 2026-12-02, medians of 6-7): sealing 96-115 ms against 111-134 ms
through the pipeline alone, opening 104 ms against 138 ms.
"""

import contextlib
import os
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import EncryptError, PayloadError, TruncatedError
from ..io.callers import any_thread
from ..io.reserve import positional_fd
from ..io.writes import write_failed
from .engine import ENGINE_AFTER, Engine
from .rules import CHUNK_SIZE, SEALED_CHUNK_SIZE
from .stream import open_batch

if TYPE_CHECKING:
    from .pipeline import Fill

_SEAL, _OPEN = "seal", "open"


class _Head:
    """The head of a payload under way on the file kernel: its whole batches but
    the last; finish() says where the rest (the tail) starts."""

    def __init__(self, direction: str, engine: Engine, kernels: ModuleType, job: Any, key: bytes, batches: int,
                 reader: Any, src_fd: int, read_at: int, writer: Any, dst_fd: int, write_at: int) -> None:
        self._direction, self._engine, self._kernels, self._job, self._key = direction, engine, kernels, job, key
        self._batches, self._batch_chunks = batches, kernels.FILE_BATCH
        self._reader, self._src_fd, self._read_at = reader, src_fd, read_at
        self._writer, self._dst_fd, self._write_at = writer, dst_fd, write_at
        self._in, self._out = (CHUNK_SIZE, SEALED_CHUNK_SIZE) if direction == _SEAL else (SEALED_CHUNK_SIZE,
                                                                                          CHUNK_SIZE)
        self._finished = False      # every batch written: the output is whole so far
        self._verified: int | None = None   # where the output ends after a batch that did not verify

    def start(self) -> None:
        self._job.start()

    def finish(self) -> tuple[int, int, int]:
        """Wait for the batches; move the reader and the writer to where the rest
        of the payload is read and written, and return (read_at, write_at, the
        counter of its first chunk), for agefast.payload.pipeline."""
        try:
            failed = self._job.wait()
        except EOFError:
            if self._direction == _SEAL:
                raise EncryptError("the input file shrank while it was encrypted") from None
            raise TruncatedError("the file is truncated: it shrank while it was decrypted") from None
        except self._kernels.WriteError as e:
            raise write_failed(self._writer, OSError(e.errno, e.strerror)) from None
        if failed is not None:
            raise self._open_failed(failed)
        self._finished = True
        counter = self._batches * self._batch_chunks
        read_at = self._read_at + counter * self._in
        write_at = self._write_at + counter * self._out
        self._reader.seek(read_at)
        self._writer.seek(write_at)
        return read_at, write_at, counter

    def _open_failed(self, batch: int) -> PayloadError:
        """Open batch `batch`, the first that did not verify, as the pipeline
        would: write the plaintext of its chunks before the failing one after
        the batches before it, and say why it failed, in the pipeline's words
        (agefast.payload.stream.open_batch)."""
        size = self._batch_chunks * SEALED_CHUNK_SIZE
        sealed = os.pread(self._src_fd, size, self._read_at + batch * size)
        plain = bytearray(self._batch_chunks * CHUNK_SIZE)
        _, verified, problem = open_batch(self._engine, self._key, batch * self._batch_chunks, sealed, plain, False,
                                          split=False)
        at = self._write_at + batch * self._batch_chunks * self._out
        self._verified = at
        view = memoryview(plain)[:verified]
        try:
            while view:
                n = os.pwrite(self._dst_fd, view, at)
                view, at = view[n:], at + n
                self._verified = at
        except OSError as e:
            raise write_failed(self._writer, e) from None
        return problem or PayloadError("the payload changed while it was read")

    def stop(self) -> None:
        """End the work after the batches under way; unless finish() returned,
        cut the output back to the prefix age would leave."""
        try:
            self._job.stop()    # raises a signal's exception that came meanwhile, once the workers ended
        finally:
            self._cut_back()

    def _cut_back(self) -> None:
        if self._finished:
            return
        end = self._verified
        if end is None:
            end = self._write_at + self._job.written() * self._batch_chunks * self._out
        if os.fstat(self._dst_fd).st_size > end:
            os.ftruncate(self._dst_fd, end)
        self._writer.seek(end)


def _nothing_after(fd: int, at: int) -> bool:
    """Whether the file ends at or before `at`: then cutting the output back
    after a failure takes only what the workers wrote. A file opened to be
    written over (`1<> out`) keeps its bytes past the verified prefix, as
    age's in-order writes leave them: the pipeline writes those outputs."""
    return os.fstat(fd).st_size <= at


@contextlib.contextmanager
def _started(direction: str, reader: Any, writer: Any, key: bytes, read_at: int | None, write_at: int | None,
             size: int, engine: Engine) -> Iterator[_Head | None]:
    """The whole batches but the last of a payload of `size` bytes (the input's)
    sealed or opened from `reader` at `read_at` into `writer` at `write_at`;
    None where the file kernel does not apply (offsets not known, not regular
    files, an output with bytes of its own past `write_at`, under
    engine.ENGINE_AFTER, below which a job stays on cryptography by default
    and starting workers would not pay back, or a job the engine leaves to
    cryptography).

    The workers are stopped before the block is left, however it is left: the
    files are never closed under them. Left before finish() returned, the
    output ends where the first chunk that failed begins (_Head.stop).
    """
    head = None
    # The files' descriptors are asked for only where the size could use them: their fstats and fcntls were
    # 4 us of a 1 KiB payload's 16 through here (2026-12-07, Zen 5).
    src_fd, dst_fd = (positional_fd(reader), positional_fd(writer)) if size >= ENGINE_AFTER else (None, None)
    if read_at is not None and write_at is not None and src_fd is not None and dst_fd is not None \
            and _nothing_after(dst_fd, write_at):
        kernels = engine.kernels
        if kernels is not None:
            writer.flush()      # what a buffered writer holds lands before the workers' writes
            batch = kernels.FILE_BATCH * (CHUNK_SIZE if direction == _SEAL else SEALED_CHUNK_SIZE)
            count = (size - 1) // batch
            start = kernels.seal_file if direction == _SEAL else kernels.open_file
            # Started once the head owns the job: a signal's exception in between (or while a worker starts)
            # still finds the head to stop the workers and cut the output back.
            job = start(key, src_fd, read_at, dst_fd, write_at, count, engine.threads, start=False)
            head = _Head(direction, engine, kernels, job, key, count, reader, src_fd, read_at, writer, dst_fd,
                         write_at)
    try:
        if head is not None:
            head.start()
        yield head
    finally:
        if head is not None:
            head.stop()


def _move(direction: str, reader: Any, writer: Any, key: bytes, engine: Engine, read_at: int | None,
          write_at: int | None, size: int, fill: "Fill | None", meanwhile: Callable[[], None] | None) -> None:
    with _started(direction, reader, writer, key, read_at, write_at, size, engine) as head:
        # Imported once the workers are under way, which the command's head start wants as early as can be.
        from ..io.source import Source
        from .pipeline import open_stream, seal_stream

        if meanwhile is not None:
            meanwhile()
        counter = 0
        if head is not None:
            read_at, write_at, counter = head.finish()
            fill = None    # the rest is read from where the batches ended, past anything read ahead
        stream = seal_stream if direction == _SEAL else open_stream
        stream(Source(reader).fill if fill is None else fill, writer, key, engine, read_at=read_at,
               write_at=write_at, counter=counter, anywhere=any_thread(reader) and any_thread(writer))


def seal_payload(reader: Any, writer: Any, key: bytes, engine: Engine, *, read_at: int | None,
                 write_at: int | None, size: int, meanwhile: Callable[[], None] | None = None) -> None:
    """Seal all of `reader` (`size` bytes from `read_at`, where it is a file)
    as the payload under `key` onto `writer` (at `write_at`): its whole
    batches but the last on the file kernel where it applies, the rest
    through the pipeline, all on `engine`.

    `meanwhile()`, if given, runs on this thread once the kernel's workers
    are under way (at once where they do not apply), before the rest: the
    command's head start makes the header then (agefast.cli.early_payload).
    """
    _move(_SEAL, reader, writer, key, engine, read_at, write_at, size, None, meanwhile)


def open_payload(reader: Any, writer: Any, key: bytes, engine: Engine, *, read_at: int | None,
                 write_at: int | None, size: int, fill: "Fill | None" = None) -> None:
    """Open the payload of `reader` (`size` bytes from `read_at`, after the
    header, where it is a file) under `key` onto `writer` (at `write_at`),
    as seal_payload seals one. `fill`, if given, reads the payload where
    the file kernel does not apply (the header's reader, which may have read
    ahead of `reader`).

    Only verified plaintext is written: on a PayloadError `writer` holds the
    plaintext of every chunk before the first that failed, and nothing after.
    """
    _move(_OPEN, reader, writer, key, engine, read_at, write_at, size, fill, None)
