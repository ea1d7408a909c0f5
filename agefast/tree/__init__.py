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
left (force=True does everything again). docs/tree.md has the details.
"""

import json
import os
from collections.abc import Iterable
from typing import Any

from .. import _arguments
from .._typing import Identity, Recipient, StrPath
from .files import DECRYPT, ENCRYPT, REKEY, VERIFY, Job
from .run import Summary, run

__all__ = ["Summary", "decrypt", "encrypt", "rekey", "verify"]


def _root(name: str, value: StrPath) -> bytes:
    # Absolute: worker processes (a Dask cluster's) may start elsewhere.
    return os.path.abspath(os.fsencode(_arguments.path(name, value)))


def _unlocked(identities: Iterable[Identity]) -> list[Identity]:
    """The identities, with those of an encrypted identity file decrypted now: its passphrase is asked once,
    before any worker starts, not by each worker."""
    from ..keys import EncryptedIdentityFile

    out: list[Identity] = []
    for identity in _arguments.identities(identities):
        out += identity.identities() if isinstance(identity, EncryptedIdentityFile) else [identity]
    return out


def _run(job: Job, force: bool, workers: int | None, report: StrPath | None, progress: bool,
         client: Any) -> Summary:
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise ValueError(f"workers must be a positive int or None, not {workers!r}")
    summary = run(job, force=force, workers=workers, progress=progress, client=client)
    if report is not None:
        with open(_arguments.path("report", report), "w", encoding="ascii") as f:
            f.writelines(json.dumps(r) + "\n" for r in summary.records)
    return summary


def encrypt(src: StrPath, dst: StrPath, recipients: Iterable[Recipient], *, armored: bool = False,
            force: bool = False, workers: int | None = None, report: StrPath | None = None,
            progress: bool = False, client: Any = None) -> Summary:
    """Encrypt every regular file F under `src` to `dst`/F.age, for `recipients`.

    `workers` processes (default: one per core) take the small files;
    `report` names a file for one JSON line per file met; `progress` shows
    a bar when stderr is a terminal; `client`, a dask.distributed.Client,
    runs the files as tasks on its cluster instead (the same for every
    operation).
    """
    _arguments.flag("armored", armored)
    job = Job(ENCRYPT, _root("src", src), _root("dst", dst), _arguments.recipients(recipients), [], armored)
    return _run(job, force, workers, report, progress, client)


def decrypt(src: StrPath, dst: StrPath, identities: Iterable[Identity], *, force: bool = False,
            workers: int | None = None, report: StrPath | None = None, progress: bool = False,
            client: Any = None) -> Summary:
    """Decrypt every age file F.age under `src` to `dst`/F; other files are reported and left."""
    job = Job(DECRYPT, _root("src", src), _root("dst", dst), [], _unlocked(identities))
    return _run(job, force, workers, report, progress, client)


def rekey(src: StrPath, identities: Iterable[Identity], recipients: Iterable[Recipient], dst: StrPath | None = None,
          *, force: bool = False, workers: int | None = None, report: StrPath | None = None,
          progress: bool = False, client: Any = None) -> Summary:
    """Re-key every age file under `src` for exactly `recipients`, in place or into `dst`.

    As agefast.rekey: the payload is copied, not encrypted again, so the
    file keys stay the same (whoever kept one still reads its file).
    """
    job = Job(REKEY, _root("src", src), None if dst is None else _root("dst", dst),
              _arguments.recipients(recipients), _unlocked(identities))
    return _run(job, force, workers, report, progress, client)


def verify(src: StrPath, identities: Iterable[Identity], *, workers: int | None = None,
           report: StrPath | None = None, progress: bool = False, client: Any = None) -> Summary:
    """Decrypt and authenticate every age file under `src`, writing nothing; a failure's record names its chunk."""
    job = Job(VERIFY, _root("src", src), None, [], _unlocked(identities))
    return _run(job, False, workers, report, progress, client)
