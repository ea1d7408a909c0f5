"""Whole trees of files: encrypted, decrypted, re-keyed or verified by one process on every core.

    agefast.tree.encrypt("data", "backup", [recipient])     # data/F -> backup/F.age
    agefast.tree.decrypt("backup", "restored", [identity])  # backup/F.age -> restored/F
    agefast.tree.rekey("backup", [identity], [new_recipient])   # in place
    agefast.tree.verify("backup", [identity])               # every chunk authenticated, nothing written

Every regular file under the source is taken (for decrypt, rekey and
verify, every F.age); symbolic links are not followed and special files are
left, each reported. Each file is a file of its own to age: its own file
key, shares and nonce. Outputs appear whole or not at all; a file that
fails fails alone, and the summary counts it. A manifest at the root of the
output tree (.agefast-tree.jsonl) records what was done, so a run that was
stopped, killed or failed in part can be run again and does only what is
left (force=True does everything again). Either tree may be an fsspec URL
(s3://bucket/prefix). docs/tree.md has the details.
"""

import contextlib
import os
from collections.abc import Iterable
from typing import Any

from .. import _arguments
from .._typing import Identity, Recipient, StrPath
from ..io.replace import replacing
from ..io.writes import write_all
from . import manifest
from .files import DECRYPT, ENCRYPT, REKEY, VERIFY, Job
from .run import RootsRefused, Summary, check_report, run, told_with
from .store import Local, Store, StoreError, store_at

__all__ = ["RootsRefused", "StoreError", "Summary", "decrypt", "encrypt", "rekey", "verify"]


def _kept(keep: Iterable[StrPath]) -> frozenset[tuple[int, int]]:
    """The files at the paths `keep` (device and inode), which no output may replace; a missing one is no file."""
    if isinstance(keep, (str, bytes, os.PathLike)):
        raise TypeError("keep must be an iterable of paths, not one path")
    kept = set()
    for path in keep:
        try:
            st = os.stat(_arguments.path("keep", path))
        except FileNotFoundError:
            continue
        kept.add((st.st_dev, st.st_ino))
    return frozenset(kept)


def _stores(src: StrPath, dst: StrPath | None, storage_options: dict[str, Any] | None,
            kept: frozenset[tuple[int, int]]) -> tuple[Store, Store | None]:
    if storage_options is not None and not isinstance(storage_options, dict):
        raise TypeError(f"storage_options must be a dict or None, not {type(storage_options).__name__}")

    def at(name: str, value: StrPath) -> Store:
        store = store_at(name, value, storage_options)
        return store._replace(kept=kept) if isinstance(store, Local) else store
    return at("src", src), None if dst is None else at("dst", dst)


def _unlocked(identities: Iterable[Identity]) -> list[Identity]:
    """The identities, with those of an encrypted identity file and passphrase-protected SSH keys decrypted now:
    each passphrase is asked once, before any worker starts, not by each worker (a forked worker asked again,
    and a Dask cluster's could not be sent the key at all)."""
    from ..keys import EncryptedIdentityFile
    from ..recipients.ssh import EncryptedIdentity

    out: list[Identity] = []
    for identity in _arguments.identities(identities):
        if isinstance(identity, EncryptedIdentityFile):
            out += identity.identities()
        else:
            out.append(identity.unlocked() if isinstance(identity, EncryptedIdentity) else identity)
    return out


def _run(job: Job, force: bool, workers: int | None, report: StrPath | None, progress: bool,
         client: Any, kept: frozenset[tuple[int, int]]) -> Summary:
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise ValueError(f"workers must be a positive int or None, not {workers!r}")
    path = None if report is None else _arguments.path("report", report)
    if path is not None:
        check_report(job, path, kept)
    try:
        summary = run(job, force=force, workers=workers, progress=progress, client=client)
    except OSError as e:
        # A job that stopped still reports what it did: where its manifest failed, the report is all there is.
        stopped = getattr(e, "summary", None)
        if path is not None and stopped is not None:
            with contextlib.suppress(OSError):      # the job's error is the one told
                _write_report(path, stopped)
        raise
    if path is not None:
        try:
            _write_report(path, summary)
        except OSError as e:
            told_with(e, summary)
            raise
    return summary


def _write_report(path: str | bytes, summary: Summary) -> None:
    # Whole or not at all, as an output: a failed write leaves the report there was.
    with replacing(path) as f:
        write_all(f, b"".join(manifest.line(r) for r in summary.records))


def encrypt(src: StrPath, dst: StrPath, recipients: Iterable[Recipient], *, armored: bool = False,
            force: bool = False, workers: int | None = None, report: StrPath | None = None,
            progress: bool = False, client: Any = None, storage_options: dict[str, Any] | None = None,
            keep: Iterable[StrPath] = ()) -> Summary:
    """Encrypt every regular file F under `src` to `dst`/F.age, for `recipients`.

    `src` and `dst` are local folders or fsspec URLs (s3://bucket/prefix,
    gs://..., with `storage_options` for their filesystem; s3fs also reads
    AWS_ENDPOINT_URL and the rest from the environment).
    `workers` processes (default: one per core) take the small files;
    `report` names a file for one JSON line per file met; `progress` shows
    a bar when stderr is a terminal; `client`, a dask.distributed.Client,
    runs the files as tasks on its cluster instead (the same for every
    operation); `keep` names files no output may replace, whatever its
    name (the command passes its -i and -R files), as agefast's -o refuses
    them.
    """
    _arguments.flag("armored", armored)
    kept = _kept(keep)
    job = Job(ENCRYPT, *_stores(src, dst, storage_options, kept), _arguments.recipients(recipients), [], armored)
    return _run(job, force, workers, report, progress, client, kept)


def decrypt(src: StrPath, dst: StrPath, identities: Iterable[Identity], *, force: bool = False,
            workers: int | None = None, report: StrPath | None = None, progress: bool = False,
            client: Any = None, storage_options: dict[str, Any] | None = None,
            keep: Iterable[StrPath] = ()) -> Summary:
    """Decrypt every age file F.age under `src` to `dst`/F; other files are reported and left."""
    kept = _kept(keep)
    job = Job(DECRYPT, *_stores(src, dst, storage_options, kept), [], _unlocked(identities))
    return _run(job, force, workers, report, progress, client, kept)


def rekey(src: StrPath, identities: Iterable[Identity], recipients: Iterable[Recipient], dst: StrPath | None = None,
          *, force: bool = False, workers: int | None = None, report: StrPath | None = None,
          progress: bool = False, client: Any = None, storage_options: dict[str, Any] | None = None,
          keep: Iterable[StrPath] = ()) -> Summary:
    """Re-key every age file under `src` for exactly `recipients`, in place or into `dst`.

    As agefast.rekey: the payload is copied, not encrypted again, so the
    file keys stay the same (whoever kept one still reads its file). On S3
    it is copied by the server: only each header and first part (5 MiB)
    are sent.
    """
    kept = _kept(keep)
    job = Job(REKEY, *_stores(src, dst, storage_options, kept), _arguments.recipients(recipients),
              _unlocked(identities))
    return _run(job, force, workers, report, progress, client, kept)


def verify(src: StrPath, identities: Iterable[Identity], *, workers: int | None = None,
           report: StrPath | None = None, progress: bool = False, client: Any = None,
           storage_options: dict[str, Any] | None = None, keep: Iterable[StrPath] = ()) -> Summary:
    """Decrypt and authenticate every age file under `src`, writing nothing but the report (never over a file of
    `keep`); a failure's record names its chunk."""
    kept = _kept(keep)
    job = Job(VERIFY, _stores(src, None, storage_options, kept)[0], None, [], _unlocked(identities))
    return _run(job, False, workers, report, progress, client, kept)
