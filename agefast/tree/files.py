"""One file of a tree job: encrypted, decrypted, re-keyed or verified, its outcome as a manifest record.

Each file gets what a single `agefast` run would give it: its own file key,
its own ephemeral share per X25519 stanza and its own payload nonce (the job
shares the parsed keys, never randomness). An output appears whole or not
at all (agefast.io.replace), and its manifest line is written before it
takes its name (agefast.tree.manifest says why); on an fsspec store, once
it is there (agefast.tree.store). A file that fails (a
damaged payload, a wrong key, an unreadable file) fails alone: its record
says why, and the job goes on.

Small files (whole_up_to) are read whole and handled in memory, where the
output's SHA-256 costs little to take; larger ones stream through the
engine (file to file on every core), and their record has no SHA-256:
hashing such an output would cost more than sealing it. Re-keying on S3
copies the payload of files from s3copy.COPY_FROM on the server instead
(agefast.tree.s3copy).
"""

import errno
import hashlib
import io
import os
from collections.abc import Callable
from typing import Any, NamedTuple

from .. import api, rekeying
from .._typing import Identity, Recipient
from ..errors import AgeError, EngineError, NoIdentityMatchError, PayloadError
from ..payload.rules import CHUNK_SIZE
from . import s3copy
from .manifest import Appender, Rewriter
from .store import Content, Local, Remote, Stat, Store
from .walk import MANIFEST_NAME, Found

ENCRYPT, DECRYPT, REKEY, VERIFY = "encrypt", "decrypt", "rekey", "verify"
SUFFIX = b".age"
# Files read whole into memory where either end of the job is a store: one request each way (a put, not an
# upload in parts), which a round trip's latency makes worth it up to here. Above it a file streams.
IN_MEMORY = 32 * 1024 * 1024
# Between local folders, files up to api.SMALL_FILE, the size up to which encrypt_file reads a file whole too.
# Above it the payload engine's file to file path is faster than reading whole and hashing the output: 40 files
# of 6 MiB on tmpfs took 0.34 s whole, 0.27 s whole without the SHA-256, 0.21 s streamed (Go age once per file
# on both cores 0.20 s; 2026-12-07, Zen 5: benchmarks/HISTORY.md).
LOCAL_IN_MEMORY = api.SMALL_FILE

Manifest = Appender | Rewriter


class Job(NamedTuple):
    """What every file of one run shares: the operation, the two roots and the parsed keys."""

    operation: str
    source: Store
    destination: Store | None   # None: verify (nothing written), or rekey in place
    recipients: list[Recipient]
    identities: list[Identity]
    armored: bool = False
    sealed_for: str | None = None   # sealed_for(), set once per run (agefast.tree.run): not per file
    # Where the source lies under the destination, if it does (set once per run): no output goes there, where it
    # could replace an input.
    source_below: bytes | None = None


def sealed_for(recipients: list[Recipient], armored: bool) -> str | None:
    """What the outputs of an encrypting job (encrypt, rekey) are sealed for, as its records keep it: a SHA-256
    of the recipients' texts (age1..., ssh-ed25519 ...) and of armor, so that a run for other recipients does
    every file again instead of skipping it. None for decrypt and verify. (A recipient's text is its Bech32
    encoding, ~80 us: once per run.)"""
    if not recipients:
        return None
    texts = sorted(str(r) for r in recipients) + (["armored"] if armored else [])
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()


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


def check_output(job: Job, path: bytes, name: bytes) -> None:
    """OSError for the output `name` of the file at `path` where it may not be written: one reaching out of the
    tree, the manifest's, none at all, or one inside the source tree."""
    # An object store's key is any text: "a/../../x" names no file of a folder tree, but reaches out of one (a
    # local DST), and "a//b" or "a/./b" would share an output with "a/b".
    if any(part in (b"", b".", b"..") for part in path.split(b"/")) or b"\0" in path:
        raise OSError(errno.EINVAL, "a name with an empty, '.' or '..' part, or a NUL, which no file of a tree "
                      "has: not written", os.fsdecode(path))
    if name == MANIFEST_NAME:
        raise OSError(errno.EPERM, "the manifest's name, not replaced", os.fsdecode(name))
    if not os.path.basename(name):      # decrypting a file named .age
        raise OSError(errno.EINVAL, "a file named .age, which leaves its output no name")
    inside = job.source_below
    if inside is not None and (name == inside or name.startswith(inside + b"/")):
        raise OSError(errno.EPERM, "inside the source, where an output could replace an input: not written",
                      os.fsdecode(name))


def output_root(job: Job) -> Store:
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


def whole_up_to(job: Job) -> int:
    """The size up to which the job reads a file whole (IN_MEMORY, LOCAL_IN_MEMORY)."""
    if isinstance(job.source, Remote) or isinstance(job.destination, Remote):
        return IN_MEMORY
    return LOCAL_IN_MEMORY


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


def _header_for(job: Job) -> s3copy.NewHeader:
    def new_header(head: bytes) -> tuple[int, bytes] | None:
        opened = rekeying.open_file(io.BytesIO(head), job.identities)
        if opened.armored:      # its payload is re-encoded with the header: no copying it as it is
            return None
        return opened.source.consumed, rekeying.new_header(opened, job.recipients)
    return new_header


def _by_copy(job: Job, found: Found, name: bytes, record: dict[str, Any]) -> bool:
    """Re-key `found` into `name` by S3's server-side copy where the two are on one S3 store and the file is
    large enough to gain; whether it was."""
    source, target = job.source, output_root(job)
    if not (job.operation == REKEY and found.size >= s3copy.COPY_FROM and isinstance(source, Remote)
            and isinstance(target, Remote) and source.same_store(target) and s3copy.is_s3(source.fs)):
        return False
    try:
        if not s3copy.rekey(source.fs, source.key(found.path), target.key(name), found.size, found.stamp,
                            _header_for(job)):
            return False
    except OSError:
        # In place, a completion that failed may have found the object replaced meanwhile: then that is told.
        if found.stamp is not None and source.key(found.path) == target.key(name):
            target.refuse_if_replaced(name, found.stamp)
        raise
    size, stamp = target.written(name)
    record.update(status="done", output_size=size, sha256=None, **{"output_" + target.stamp_key: stamp})
    return True


def process(job: Job, found: Found, manifest: Manifest | None, threads: int | None = 1) -> dict[str, Any]:
    """Do the job's operation on one file; its record, added to `manifest` (if any) before the output is named."""
    store = job.source
    record: dict[str, Any] = {"operation": job.operation, "source": os.fsdecode(found.path), "size": found.size,
                              store.stamp_key: found.stamp, "sealed_for": job.sealed_for}
    name = output_name(job, found.path)
    try:
        if name is None:      # verify: the plaintext is checked and dropped
            _verify(job, found, threads)
            record["status"] = "done"
        else:
            record["output"] = os.fsdecode(name)
            check_output(job, found.path, name)
            if not _by_copy(job, found, name, record):
                if found.size <= whole_up_to(job):
                    _write(job, found, name, _in_memory(job, store.read(found.path)), record, manifest)
                else:
                    with store.open(found.path) as src:
                        _write(job, found, name, lambda dst: _streamed(job, threads)(src, dst), record, manifest)
                return record     # its line added by _write, before the output took its name
    except EngineError:
        raise       # the engine a setting asks for, not this file: the job's to fail, once
    except (AgeError, OSError) as e:
        if isinstance(e, OSError) and isinstance(e.filename, bytes):     # named as the file system decodes it
            e = type(e)(e.errno, e.strerror, os.fsdecode(e.filename))
        record.update(status="failed", error=str(e) or type(e).__name__)
        if isinstance(e, NoIdentityMatchError) and job.operation == REKEY and job.destination is None \
                and isinstance(store, Remote):
            # A store's manifest is rewritten every few seconds: a killed run may have re-keyed this one
            # unrecorded, and only the new identities open it now.
            record["error"] += ("; if an earlier run was stopped, it may have re-keyed this file before recording "
                                "it: give the new identities too (-i)")
        if isinstance(e, PayloadError) and job.operation != ENCRYPT:
            with store.open(found.path) as again:
                record["chunk"] = first_bad_chunk(again, job.identities)
    if manifest is not None:
        manifest.append([record])
    return record


def _verify(job: Job, found: Found, threads: int | None) -> None:
    if found.size <= whole_up_to(job):
        _in_memory(job, job.source.read(found.path))
    else:
        with job.source.open(found.path) as src:
            _streamed(job, threads)(src, _Counter())


def _write(job: Job, found: Found, name: bytes, content: Content, record: dict[str, Any],
           manifest: Manifest | None) -> None:
    target = output_root(job)

    def named(output: Stat) -> None:
        if job.destination is None and isinstance(target, Local) and target.stats()(found.path) != (
                found.size, found.stamp):
            # In place, a file another program wrote to since the walk: what it wrote would go with the rename
            # (a streamed re-key checks its own input: agefast.rekeying).
            raise OSError(errno.EBUSY, "the file changed while it was re-keyed: left as it is",
                          os.fsdecode(found.path))
        record.update(status="done", output_size=output[0], **{"output_" + target.stamp_key: output[1]},
                      sha256=hashlib.sha256(content).hexdigest() if isinstance(content, bytes) else None)
        if manifest is not None:
            manifest.append([record])
    # In place (re-keying), the file an output replaces is the only copy of its payload; an object another
    # writer replaced since it was read is left as they left it.
    if isinstance(target, Remote) and job.destination is None:
        target.put(name, content, named, unchanged=found.stamp)
    else:
        target.put(name, content, named, durable=job.destination is None)
