"""A file of an fsspec store opened with autocommit=False, committed or thrown away.

Stores keep such a file as an upload (S3's multipart) or a temporary file
until commit(), and discard() throws it away; but simplecache's and
filecache's temporary files take no autocommit=False: their close()
uploads. So what commits and what discards depends on the file.
"""

from typing import Any


def commits_exclusively(fs: Any) -> bool:
    """Whether the store `fs`'s files opened "xb" with autocommit=False refuse, at their commit, a file made
    under the name meanwhile: s3fs's (If-None-Match: *). Elsewhere (a local file system's, whose commit is a
    rename) "xb" must be committed on close."""
    return type(fs).__module__.split(".")[0] == "s3fs"


def _commits_on_close(f: Any) -> bool:
    return bool(getattr(f, "autocommit", False))


def commit(f: Any) -> None:
    """Close `f` and commit what was written to it."""
    f.close()
    if not _commits_on_close(f) and (done := getattr(f, "commit", None)) is not None:
        done()


def discard(f: Any) -> None:
    """Throw away what was written to `f`: nothing is committed.

    A file that commits on close is discarded without being closed; the
    rest are closed first, as a close after s3fs's discard() would start
    the upload again."""
    if _commits_on_close(f):
        f.discard()
        return
    try:
        f.close()
    finally:
        if (throw := getattr(f, "discard", None)) is not None:
            throw()
