"""Checks of the public API's arguments, made before anything is read or written.

pyrage (PyO3) converts every argument on entry, so a wrong type is a
TypeError before any work is done; these checks give agefast the same
contract. Without them a str given as the reader failed only after the header
had been written to the writer, and an int given as a path was taken for a
file descriptor and closed.
"""

import functools
import io
import os
import stat
from types import ModuleType
from typing import Any

from .errors import EncryptError, SameFileError


def _type_name(value: object) -> str:
    return type(value).__name__


def path(name: str, value: object) -> str | bytes:
    """`value` as os.fspath gives it; TypeError unless it is a str, bytes or
    os.PathLike (an int would be opened as a file descriptor, and closed)."""
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"argument {name!r}: expected a path (str, bytes or os.PathLike), "
                        f"not {_type_name(value)}")
    return os.fspath(value)


def text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"argument {name!r}: expected a str, not {_type_name(value)}")
    return value


def flag(name: str, value: object) -> bool:
    # Only a bool: armored="no" must not mean True.
    if not isinstance(value, bool):
        raise TypeError(f"argument {name!r}: expected a bool, not {_type_name(value)}")
    return value


def armored_or_not(value: object) -> bool | None:
    """A decryption's `armored`: True (armor only), False (binary only) or
    None (whichever the file starts with)."""
    return None if value is None else flag("armored", value)


def _text(value: Any) -> bool:
    """Whether `value` is a text file: an io.TextIOBase, or a wrapper of one that is none itself but has its
    encoding (tempfile's NamedTemporaryFile and SpooledTemporaryFile in a text mode)."""
    return isinstance(value, io.TextIOBase) or isinstance(getattr(value, "encoding", None), str)


def reader(name: str, value: Any) -> Any:
    if _text(value) or not (hasattr(value, "readinto") or hasattr(value, "read")):
        raise TypeError(f"argument {name!r}: expected a binary file object with a .read() method, "
                        f"not {_type_name(value)}")
    # Told before anything is written (encrypt_io writes the header before its first read), as io tells it.
    if getattr(value, "closed", False) is True:
        raise ValueError(f"argument {name!r}: I/O operation on closed file")
    readable = getattr(value, "readable", None)
    if callable(readable) and not readable():
        raise io.UnsupportedOperation(f"argument {name!r}: the file is not readable")
    return value


def writer(name: str, value: Any) -> Any:
    if _text(value) or not hasattr(value, "write"):
        raise TypeError(f"argument {name!r}: expected a binary file object with a .write() method, "
                        f"not {_type_name(value)}")
    return value


def _keys(name: str, values: Any, method: str, kind: str) -> list[Any]:
    """`values` as a list of objects with `method`; TypeError naming the argument `name` (of keys called `kind`,
    with its article: "a recipient") for anything else."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"argument {name!r}: expected a list of {name}, not {_type_name(values)}")
    keys = list(values)
    for value in keys:
        if not callable(getattr(value, method, None)):
            raise TypeError(f"argument {name!r}: invalid type (expected {kind} type, not {_type_name(value)})")
    return keys


def recipients(values: Any) -> list[Any]:
    """The recipients as a list; TypeError for anything that is not one,
    EncryptError (with pyrage's text) for none at all."""
    keys = _keys("recipients", values, "wrap", "a recipient")
    if not keys:
        # pyrage 1.4's words, then those of pyrage's main branch (its own test suite matches the latter)
        raise EncryptError("Missing recipients. (expected at least one recipient)")
    return keys


def identities(values: Any) -> list[Any]:
    return _keys("identities", values, "unwrap", "an identity")


def regular_file(f: Any) -> os.stat_result | None:
    """The status of the regular file `f` (a file object) is open on, else None."""
    try:
        st = os.fstat(f.fileno())
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _same(a: os.stat_result | None, b: os.stat_result | None) -> bool:
    return a is not None and b is not None and os.path.samestat(a, b)


def _seekable(f: Any) -> bool:
    try:
        return bool(f.seekable())
    except AttributeError:
        return hasattr(f, "seek")       # an mmap
    except (OSError, ValueError):
        return False


def distinct_files(src: object, dst: object) -> None:
    """SameFileError if file objects `src` and `dst` are one regular file, or one
    object with one position to read and write at (a BytesIO, an mmap):
    writing it while reading it destroys the input, or never ends.

    Only regular files are compared: a terminal is often both stdin and stdout.
    A duplex stream, one object that reads and writes apart (a socket's
    file), is neither.
    """
    if (src is dst and _seekable(src)) or _same(regular_file(src), regular_file(dst)):
        raise SameFileError("the input and the output are the same file")


def _stat(p: str | bytes) -> os.stat_result | None:
    try:
        return os.stat(p)
    except FileNotFoundError:
        return None


def distinct_paths(infile: str | bytes, outfile: str | bytes) -> None:
    """SameFileError if `outfile` names the file `infile` names, through
    any symlinks and hard links."""
    if _same(_stat(infile), _stat(outfile)):
        raise SameFileError(f"the input and the output are the same file: {os.fsdecode(outfile)!r}")


def buffer(name: str, value: Any) -> memoryview:
    """A flat byte view of a bytes-like `value`; TypeError for anything else (a str, a strided view)."""
    try:
        view = memoryview(value)
    except TypeError:
        raise TypeError(f"argument {name!r}: expected a bytes-like object, not {_type_name(value)}") from None
    if not view.c_contiguous:
        raise TypeError(f"argument {name!r}: expected a contiguous buffer, not a strided {_type_name(value)}")
    if not view.nbytes:
        # memoryview refuses to cast a view with a 0 in its shape (an empty batch of a 2-D array)
        return memoryview(b"" if view.readonly else bytearray())
    return view.cast("B")


def writable_buffer(name: str, value: Any) -> memoryview:
    """buffer(), and a TypeError where it cannot be written (bytes)."""
    view = buffer(name, value)
    if view.readonly:
        raise TypeError(f"argument {name!r}: expected a writable buffer, not a read-only {_type_name(value)}")
    return view


@functools.cache
def _lending() -> ModuleType:
    # ctypes: imported by the first call that needs it, not with agefast (2.4 ms of start-up); an import
    # statement in distinct_buffers was 1.5 of its 3 us (2026-12-06, Zen 2).
    from .io import lending

    return lending


def distinct_buffers(name: str, data: Any, buf: Any) -> None:
    """ValueError if the buffer of `buf` shares memory with the buffer of `data`:
    the engine would write over input it has yet to read (a file of other
    plaintext), or a thread over another's (a valid file failing). Given the
    caller's objects, not views of them, a bytes and a bytearray are looked
    at in ~1 us (a read-only view takes PyObject_GetBuffer's 2 us)."""
    if _lending().overlap(data, buf):
        raise ValueError(f"buf must not overlap {name}")
