"""Whether a place is this user's alone: where agefast may load code from or find a program to run.

What agefast runs (the compiled kernels, an age plugin, the C compiler
driver that links the kernels) must come from where no other account can
write, or rename what lies there: as OpenSSH treats ~/.ssh. A folder or
file is trusted if this user or root owns it and neither group nor others
may write it; a folder above one may be writable by others only if it is
sticky (as /tmp), where nobody renames what is not theirs.
"""

import os
import stat


def refusal(st: os.stat_result) -> str | None:
    """Why a file or folder is not trusted to hold code this process runs, or None: another user's, or writable by others."""
    if st.st_uid != os.geteuid():
        return f"it is owned by uid {st.st_uid}, not by uid {os.geteuid()}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"it is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def above_refusal(real: str) -> str | None:
    """Why another account could rename or replace what lies in the folder `real` (a real path, no link in it), or
    None: it and every folder above it are this user's or root's, and writable by others only if sticky."""
    above = real
    while True:
        st = os.stat(above)
        if st.st_uid not in (0, os.geteuid()):
            return f"{above} is owned by uid {st.st_uid}"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
            return f"{above} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
        parent = os.path.dirname(above)
        if parent == above:
            return None
        above = parent


def path_refusal(path: str) -> str | None:
    """Why code must not be loaded by path from the folder `path` (Numba's cache), or None.

    The folder must pass refusal(), and no other account may rename or
    replace anything on the way to it (above_refusal).
    """
    real = os.path.realpath(path)
    why = refusal(os.stat(real))
    if why:
        return f"{real}: {why}"
    why = above_refusal(os.path.dirname(real))
    return f"{real}: {why}" if why else None


def program_refusal(path: str) -> str | None:
    """Why the program at `path` (as found on PATH) must not be run, or None.

    A relative path (a relative or empty PATH entry: the current folder) is
    refused, as Go's exec.LookPath refuses it. The program, the file a
    symbolic link leads to included, must be this user's or root's and not
    writable by group or others, and no other account may rename anything
    on the way to it or to the link (above_refusal).
    """
    if not os.path.isabs(path):
        return f"{path} is found in the current folder (a relative PATH entry)"
    real = os.path.realpath(path)
    st = os.stat(real)
    if st.st_uid not in (0, os.geteuid()):
        return f"{real} is owned by uid {st.st_uid}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{real} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    for folder in {os.path.dirname(real), os.path.realpath(os.path.dirname(path))}:
        why = above_refusal(folder)
        if why:
            return why
    return None


def trusted_search_path(search_path: str) -> str:
    """The folders of the PATH value `search_path` a program may be looked up in by what agefast runs (the C
    compiler driver looks up its linker there): absolute ones, this user's or root's, writable by nobody else
    (sticky or not: anyone may add a name to /tmp), with no other account able to rename them (above_refusal)."""
    kept = []
    for folder in search_path.split(os.pathsep):
        if not os.path.isabs(folder):
            continue
        real = os.path.realpath(folder)
        try:
            st = os.stat(real)
            if st.st_uid not in (0, os.geteuid()) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                continue
            if above_refusal(os.path.dirname(real)) is None:
                kept.append(folder)
        except OSError:
            continue
    return os.pathsep.join(kept)
