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


def _entry_refusal(folder: str, folder_st: os.stat_result, name: str, entry: os.stat_result) -> str | None:
    """Why another account could change what `name` in `folder` is, or None: the folder is this user's or root's,
    and if others may write it, it is sticky (as /tmp) and the entry is this user's or root's, which no one else
    may then rename or replace."""
    if folder_st.st_uid not in (0, os.geteuid()):
        return f"{folder} is owned by uid {folder_st.st_uid}"
    if folder_st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        if not folder_st.st_mode & stat.S_ISVTX:
            return f"{folder} is writable by group or others (mode {stat.S_IMODE(folder_st.st_mode):o})"
        if entry.st_uid not in (0, os.geteuid()):
            return f"{os.path.join(folder, name)} is owned by uid {entry.st_uid}, in a folder others may write"
        if not stat.S_ISDIR(entry.st_mode) and entry.st_nlink > 1:
            # Another account may link a program of root's there under a name of its choosing (where the
            # kernel's protected_hardlinks is off): the link has the program's owner.
            return f"{os.path.join(folder, name)} is a hard link, in a folder others may write"
    return None


_MAX_LINKS = 40     # as Linux's path lookup (ELOOP)


def _walk(path: str) -> tuple[str, os.stat_result, str | None]:
    """(the real path of the absolute `path`, what is there, why another account could change what it leads to or
    None), name by name from the root: every folder on the way, every symbolic link (and the folder it lies in)
    and what the last one leads to. OSError where something on the way is missing."""
    names = [name for name in path.split("/") if name]
    real, links = "/", 0
    folder_st = os.stat(real)
    while names:
        name = names.pop(0)
        if name == ".":
            continue
        if name == "..":
            real = os.path.dirname(real)
            folder_st = os.stat(real)
            continue
        here = os.path.join(real, name)
        entry = os.lstat(here)
        why = _entry_refusal(real, folder_st, name, entry)
        if why:
            return here, entry, why
        if stat.S_ISLNK(entry.st_mode):
            links += 1
            if links > _MAX_LINKS:
                return here, entry, f"{here}: too many symbolic links"
            target = os.readlink(here)
            names = [n for n in target.split("/") if n] + names
            if target.startswith("/"):
                real = "/"
                folder_st = os.stat(real)
            continue
        real, folder_st = here, entry
    return real, folder_st, None


def checked_program(path: str) -> tuple[str, str | None]:
    """(the real path to run the program found at `path` by, why it must not be run or None).

    A relative path (a relative or empty PATH entry: the current folder) is
    refused, as Go's exec.LookPath refuses it. No other account may change
    what any name on the way to it means: every folder on the way is this
    user's or root's and writable by no one else, or sticky with the name
    in it this user's or root's (a symbolic link included, and the folder it
    lies in). The program itself is this user's or root's and not writable by
    group or others. Run it by the real path: looked up again, a link on the
    way could have changed meanwhile.
    """
    if not os.path.isabs(path):
        return path, f"{path} is found in the current folder (a relative PATH entry)"
    real, st, why = _walk(path)
    return real, why or _owner_refusal(real, st)


def _owner_refusal(real: str, st: os.stat_result) -> str | None:
    """Why another account could change the file or folder `real` itself, or None: it is this user's or root's,
    and writable by neither group nor others."""
    if st.st_uid not in (0, os.geteuid()):
        return f"{real} is owned by uid {st.st_uid}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{real} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def program_refusal(path: str) -> str | None:
    """Why the program at `path` (as found on PATH) must not be run, or None (checked_program)."""
    return checked_program(path)[1]


def trusted_search_path(search_path: str) -> str:
    """The folders of the PATH value `search_path` a program may be looked up in by what agefast runs (the C
    compiler driver looks up its linker there), by their real paths: absolute ones that checked_program would
    take a program from, this user's or root's and writable by nobody else (sticky or not: anyone may add a name
    to /tmp)."""
    kept = []
    for folder in search_path.split(os.pathsep):
        if not os.path.isabs(folder):
            continue
        try:
            real, st, why = _walk(folder)
        except OSError:
            continue
        if why is None and stat.S_ISDIR(st.st_mode) and _owner_refusal(real, st) is None:
            kept.append(real)
    return os.pathsep.join(kept)
