"""One file of a tree job: encrypted, decrypted, re-keyed or verified, its outcome as a manifest record.

Each file gets what a single `agefast` run would give it: its own file key,
its own ephemeral share per X25519 stanza and its own payload nonce (the job
shares the parsed keys, never randomness). An output appears whole or not
at all (agefast.io.replace), and its manifest line is written before it
takes its name (agefast.tree.manifest says why). A file that fails (a
damaged payload, a wrong key, an unreadable file) fails alone: its record
says why, and the job goes on.

Files up to IN_MEMORY are read whole and handled in memory, where the
output's SHA-256 costs nothing to take; larger ones stream through the
engine (file to file on every core), and their record has no SHA-256:
hashing such an output would cost more than sealing it.
"""

import hashlib
import io
import os
from collections.abc import Callable
from typing import Any, NamedTuple

from .. import api, rekeying
from .._typing import Identity, Recipient
from ..errors import AgeError, PayloadError
from ..io.replace import replacing
from ..io.writes import write_all
from ..payload.rules import CHUNK_SIZE
from .manifest import Appender
from .walk import Found

ENCRYPT, DECRYPT, REKEY, VERIFY = "encrypt", "decrypt", "rekey", "verify"
SUFFIX = b".age"
# Files read whole into memory. Above this the payload engine's file to file
# path runs, on every core (the size from which the command uses them too).
IN_MEMORY = 32 * 1024 * 1024


class Job(NamedTuple):
    """What every file of one run shares: the operation, the two roots and the parsed keys."""

    operation: str
    source: bytes
    destination: bytes | None   # None: verify (nothing written), or rekey in place
    recipients: list[Recipient]
    identities: list[Identity]
    armored: bool = False


def takes(job: Job, path: bytes) -> bool:
    """Whether the operation applies to the file at `path`: every file is encrypted; age files (F.age) the rest."""
    return job.operation == ENCRYPT or path.endswith(SUFFIX)


def output_name(job: Job, path: bytes) -> bytes | None:
    """The name under the output's root of the result of file `path`: F.age, F (from F.age), F, or None (verify)."""
    if job.operation == VERIFY:
        return None
    if job.operation == ENCRYPT:
        return path + SUFFIX
    if job.operation == DECRYPT:
        return path[:-len(SUFFIX)]
    return path


def output_root(job: Job) -> bytes:
    """The folder the outputs go under: DST, or the source tree itself (re-keying in place)."""
    return job.source if job.destination is None else job.destination


class _Counter:
    """A writer that keeps nothing and counts what it was given: the verified plaintext."""

    def __init__(self) -> None:
        self.written = 0

    def write(self, data: memoryview) -> int:
        n = len(data)
        self.written += n
        return n


def first_bad_chunk(src: Any, identities: list[Identity]) -> int | None:
    """The index of the first chunk of age file `src` that fails to open, None if its header fails or all open."""
    seen = _Counter()
    try:
        api.decrypt_io(src, seen, identities, threads=1)
    except PayloadError:
        return seen.written // CHUNK_SIZE
    except AgeError:
        return None
    return None


def _in_memory(job: Job, data: bytes) -> bytes:
    if job.operation == ENCRYPT:
        return api.encrypt(data, job.recipients, job.armored)
    if job.operation in (DECRYPT, VERIFY):
        return api.decrypt(data, job.identities)
    opened = rekeying.open_file(io.BytesIO(data), job.identities)
    out = io.BytesIO()
    rekeying.write_file(opened, rekeying.new_header(opened, job.recipients), out)
    return out.getvalue()


def _streamed(job: Job, threads: int | None) -> Callable[[Any, Any], None]:
    if job.operation == ENCRYPT:
        return lambda src, dst: api.encrypt_io(src, dst, job.recipients, job.armored, threads=threads)
    if job.operation in (DECRYPT, VERIFY):
        return lambda src, dst: api.decrypt_io(src, dst, job.identities, threads=threads)

    def rekey(src: Any, dst: Any) -> None:
        opened = rekeying.open_file(src, job.identities)
        rekeying.write_file(opened, rekeying.new_header(opened, job.recipients), dst)
    return rekey


def process(job: Job, found: Found, manifest: Appender | None, threads: int | None = 1) -> dict[str, Any]:
    """Do the job's operation on one file; its record, appended to `manifest` (if any) before the output is named."""
    record: dict[str, Any] = {"operation": job.operation, "source": os.fsdecode(found.path), "size": found.size,
                              "mtime_ns": found.mtime_ns}
    source = os.path.join(job.source, found.path)
    name = output_name(job, found.path)
    try:
        with open(source, "rb") as src:
            data = src.read() if found.size <= IN_MEMORY else None
            if name is None:      # verify: the plaintext is checked and dropped
                if data is None:
                    _streamed(job, threads)(src, _Counter())
                else:
                    _in_memory(job, data)
                record["status"] = "done"
            else:
                record["output"] = os.fsdecode(name)
                _write(job, src, data, os.path.join(output_root(job), name), record, manifest, threads)
                return record
    except (AgeError, OSError) as e:
        record.update(status="failed", error=str(e) or type(e).__name__)
        if isinstance(e, PayloadError) and job.operation != ENCRYPT:
            with open(source, "rb") as again:
                record["chunk"] = first_bad_chunk(again, job.identities)
    if manifest is not None:
        manifest.append([record])
    return record


def _write(job: Job, src: Any, data: bytes | None, target: bytes, record: dict[str, Any],
           manifest: Appender | None, threads: int | None) -> None:
    os.makedirs(os.path.dirname(target) or b".", exist_ok=True)
    result = None if data is None else _in_memory(job, data)
    with replacing(target) as dst:
        if result is None:
            _streamed(job, threads)(src, dst)
        else:
            write_all(dst, result)
        getattr(dst, "flush")()
        st = os.fstat(getattr(dst, "fileno")())
        record.update(status="done", output_size=st.st_size,
                      output_mtime_ns=st.st_mtime_ns,
                      sha256=None if result is None else hashlib.sha256(result).hexdigest())
        if manifest is not None:
            manifest.append([record])
