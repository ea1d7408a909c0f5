"""Numba ChaCha20-Poly1305 engine for batches of age STREAM chunks.

`seal_file` and `open_file` seal or open whole batches of one file into
another with pread and pwrite, on worker threads that need no GIL until
they end.

`seal_chunks` and `open_chunks` have exactly the semantics of
agefast.payload.engine.Engine.seal / open (same nonces, same return values;
once a call returns `dst` holds verified plaintext and nothing else of what
it opened), plus `threads`:
the chunks of a batch are split into contiguous ranges that the threads
take in turn, each running the GIL-free kernel.
`open_chunk` opens one chunk into new bytes, with the least around the
kernel (random access).

The package is laid out by job: _loader (the shipped build its CPU runs
(_shipped), else the cached one (_cache), else a compile once per machine,
and the background compile), _batches (seal_chunks, open_chunks) over a
thread pool (_pool), _file_job (seal_file, open_file), _rfc8439 (a batch
under any RFC 8439 nonce and associated data, for the tests); the compiled kernels,
by what they compute: _chacha20, _poly1305, _aead (a batch of chunks) and
_file_io (whole batches of a file), with what they share in _common. _build
compiles them, _native calls them through ctypes, _abi is the C interface
both sides share. This is the only package of agefast that imports numba,
and only to compile.
"""

import os

# With error highlighting on, numba initialises colorama, whose exit handler
# writes a colour reset to a terminal: a stray "\x1b[0m" after every agefast
# command that compiled the kernels. The setting is read when numba is
# imported (by _build or the kernel modules, all submodules: this runs first).
os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")

from ._batches import CHUNK_SIZE, SEALED_CHUNK_SIZE, TAG_SIZE, open_chunk, open_chunks, seal_chunks  # noqa: E402
from ._file_job import FILE_BATCH, FileJob, WriteError, open_file, seal_file  # noqa: E402
from ._loader import Unavailable, cached, compile_in_background, is_warm, isa, load_or_warn, warm_up  # noqa: E402

__all__ = ["CHUNK_SIZE", "FILE_BATCH", "FileJob", "SEALED_CHUNK_SIZE", "TAG_SIZE", "cached", "compile_in_background",
           "is_warm", "isa", "load_or_warn", "open_chunk", "open_chunks", "open_file", "seal_chunks", "seal_file",
           "Unavailable", "warm_up", "WriteError"]
