"""The files of a tree: every regular file under a folder, by its path relative to the folder.

Names are bytes from start to end, so a name that is not UTF-8 (or holds a
space or a newline) is carried as it is. Symbolic links are never followed:
one that pointed out of the tree would let a tree job read or write outside
it. They and special files (FIFOs, sockets, devices) are reported, not read.
"""

import os
import stat
from collections.abc import Iterator
from typing import Any, NamedTuple

# The manifest of a run into (or in) a tree lives at its root (agefast.tree.manifest).
MANIFEST_NAME = b".agefast-tree.jsonl"


class Found(NamedTuple):
    """A regular file: its path under the tree's root, its size and its stamp (agefast.tree.store)."""

    path: bytes
    size: int
    stamp: Any      # modification time in ns on a local disk; ETag (or time) on an fsspec store


class Passed(NamedTuple):
    """Something that is not a regular file, left alone, and why."""

    path: bytes
    reason: str


class Unlisted(NamedTuple):
    """A folder below the root that could not be listed, or an entry of one that could not be looked at (no
    permission, a path too long), and why: the files in it are not done, and it fails alone."""

    path: bytes
    error: str


def walk(root: bytes, listed: set[tuple[int, int]] | None = None) -> Iterator[Found | Passed | Unlisted]:
    """Everything under `root` without following symbolic links: a folder's files in name order, then its folders.
    Into `listed`, the device and inode of each folder listed. OSError where the root itself cannot be listed."""
    folders = [b""]
    while folders:
        folder = folders.pop()
        here = os.path.join(root, folder) if folder else root
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
            if listed is not None:
                st = os.stat(here)
                listed.add((st.st_dev, st.st_ino))
        except OSError as e:
            if not folder:
                raise
            yield Unlisted(folder, e.strerror or str(e))
            continue
        below = []
        for entry in entries:
            path = os.path.join(folder, entry.name) if folder else entry.name
            if not folder and entry.name == MANIFEST_NAME:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:   # gone since the listing
                continue
            except OSError as e:        # a folder that may be listed but not searched, a path too long
                yield Unlisted(path, e.strerror or str(e))
                continue
            if stat.S_ISDIR(st.st_mode):
                below.append(path)
            elif stat.S_ISREG(st.st_mode):
                yield Found(path, st.st_size, st.st_mtime_ns)
            elif stat.S_ISLNK(st.st_mode):
                yield Passed(path, "a symbolic link, not followed")
            else:
                yield Passed(path, "not a regular file")
        folders += reversed(below)


def below(path: str | bytes, folder: str | bytes) -> bytes | None:
    """Where `path` lies under `folder` (b"" for the folder itself), None if not there.

    Symbolic links are resolved, and `folder` is also known by its device and
    inode where `path` reaches it by another path: a bind mount, as a
    container's two volumes of one folder. Parts of `path` or `folder` that
    do not exist yet are taken as named.
    """
    here, there = os.path.realpath(os.fsencode(path)), os.path.realpath(os.fsencode(folder))
    prefix = there.rstrip(b"/") + b"/"
    if here == there or here.startswith(prefix):
        return here[len(prefix):]
    try:
        st = os.stat(there)
    except OSError:
        return None
    target = (st.st_dev, st.st_ino)
    names: list[bytes] = []
    while True:
        try:
            at = os.stat(here)
            if (at.st_dev, at.st_ino) == target:
                return b"/".join(reversed(names))
        except OSError:     # not made yet, or not ours to look at
            pass
        parent, name = os.path.split(here)
        if parent == here:
            return None
        names.append(name)
        here = parent
