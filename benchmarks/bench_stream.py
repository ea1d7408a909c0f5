"""Streaming through file objects vs in-memory encrypt/decrypt, and stream memory.

Part 1 (time): 256 MiB written to `agefast.encryptor` in 1 MiB pieces onto an
io.BytesIO, against `agefast.encrypt` of the same bytes; and read back from
`agefast.decryptor` in 1 MiB pieces into a preallocated buffer, against
`agefast.decrypt`. The decryptor is run over the BytesIO as it is (seekable:
the random-access reader) and behind a read-only wrapper (the sequential
reader). A streaming encryptor onto a sink that discards shows what the
BytesIO's growth costs, and onto a page-cached file in --dir what a real
destination costs. Every output is checked with pyrage. The Numba
engine is loaded first, as in a long-lived process, so batches of 1 MiB and
more (the encryptor's and decryptor's batch) run on its kernels.

Part 2 (memory): tracemalloc's peak while streaming 64 MiB and 256 MiB
through an encryptor onto a file in --dir and back through a decryptor.

    python benchmarks/bench_stream.py [--size MiB] [--reps N] [--dir DIR]
"""

import hashlib
import io
import os
import sys
import tracemalloc
from pathlib import Path

import agefast
import pyrage

import common
from common import MiB

PIECE = MiB


class Sink(io.RawIOBase):
    """A destination that keeps nothing: what streaming costs without storing."""

    def writable(self):
        return True

    def write(self, b):
        return len(memoryview(b))


class Sequential(io.RawIOBase):
    """A source with readinto only, so the decryptor cannot seek."""

    def __init__(self, raw):
        super().__init__()
        self._raw = raw

    def readable(self):
        return True

    def readinto(self, b):
        return self._raw.readinto(b)


def stream_in(dst, data, recipients) -> None:
    mv = memoryview(data)
    with agefast.encryptor(dst, recipients) as w:
        for pos in range(0, len(mv), PIECE):
            w.write(mv[pos:pos + PIECE])


def stream_out(src, identities, into: bytearray) -> None:
    mv = memoryview(into)
    r = agefast.decryptor(src, identities)
    pos = 0
    while n := r.readinto(mv[pos:pos + PIECE]):
        pos += n
    if pos != len(into) or r.read(1):
        raise SystemExit(f"the decryptor produced {pos} bytes, not {len(into)}")


def timing(size: int, reps: int, directory: Path, identity, recipient, py_identity) -> dict:
    data = os.urandom(size)
    ids, rcp = [identity], [recipient]
    sealed = agefast.encrypt(data, rcp)
    outputs = {}
    buffer = bytearray(size)

    def into_bytesio():
        outputs["encryptor"] = buf = io.BytesIO()
        stream_in(buf, data, rcp)

    out_path = directory / "stream-out.age"

    def into_file():
        with open(out_path, "wb") as f:
            stream_in(f, data, rcp)

    encrypt_cases = {
        "encryptor": into_bytesio,
        "encryptor-to-sink": lambda: stream_in(Sink(), data, rcp),
        "encryptor-to-file": into_file,
        "encrypt": lambda: outputs.__setitem__("encrypt", agefast.encrypt(data, rcp)),
    }
    decrypt_cases = {
        "decryptor": lambda: stream_out(io.BytesIO(sealed), ids, buffer),
        "decryptor-sequential": lambda: stream_out(Sequential(io.BytesIO(sealed)), ids, buffer),
        "decrypt": lambda: outputs.__setitem__("decrypt", agefast.decrypt(sealed, ids)),
    }

    def verify_encrypt(name):
        if name == "encryptor-to-sink":
            return
        if name == "encryptor-to-file":
            produced = out_path.read_bytes()
        else:
            produced = outputs.pop(name)
            produced = produced.getvalue() if name == "encryptor" else produced
        if pyrage.decrypt(produced, [py_identity]) != data:
            raise SystemExit(f"{name}: the ciphertext does not decrypt to the input")

    def verify_decrypt(name):
        produced = outputs.pop("decrypt") if name == "decrypt" else buffer
        if produced != data:
            raise SystemExit(f"{name}: the plaintext differs from the input")
        buffer[:] = bytes(size)  # the next run must write every byte again

    result = {}
    for op, cases, verify, base in (("encrypt", encrypt_cases, verify_encrypt, "encrypt"),
                                    ("decrypt", decrypt_cases, verify_decrypt, "decrypt")):
        raw = common.interleave(cases, reps, verify=verify, prepare=lambda name: out_path.unlink(missing_ok=True))
        result[op] = {
            "cases": {name: {**common.summarize(c, size), **c} for name, c in raw.items()},
            # in-memory time / streaming time: 1.0 means streaming costs nothing extra
            "stream_vs_memory": {name: common.paired_ratio(raw[name], raw[base])
                                 for name in raw if name != base},
        }
    out_path.unlink(missing_ok=True)
    return result


def traced_peak(fn) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def memory(size: int, directory: Path, identity, recipient) -> dict:
    """tracemalloc peaks of an encryptor and a decryptor streaming `size` bytes."""
    piece = os.urandom(PIECE)
    expected = hashlib.sha256(piece * (size // PIECE)).hexdigest()
    path = directory / "stream.age"

    def encrypt():
        with open(path, "wb") as f, agefast.encryptor(f, [recipient]) as w:
            for _ in range(size // PIECE):
                w.write(piece)

    def decrypt():
        digest = hashlib.sha256()
        buf = bytearray(PIECE)
        with open(path, "rb") as f:
            r = agefast.decryptor(f, [identity])
            while n := r.readinto(buf):
                digest.update(memoryview(buf)[:n])
        if digest.hexdigest() != expected:
            raise SystemExit("the streamed file does not round-trip")

    peaks = {"encryptor": traced_peak(encrypt), "decryptor": traced_peak(decrypt)}
    path.unlink()
    return peaks


def main() -> None:
    args = common.arguments(__doc__, 7, [("--size", 256, "MiB streamed in the timing part")])
    common.warm_engine()
    identity = agefast.x25519.Identity.generate()
    recipient = identity.to_public()
    py_identity = pyrage.x25519.Identity.from_str(str(identity))
    result = {"size": args.size * MiB, "piece": PIECE,
              "timing": timing(args.size * MiB, args.reps, args.dir, identity, recipient, py_identity),
              "tracemalloc_peak_bytes": {}}
    for size in (64 * MiB, 256 * MiB):
        peaks = memory(size, args.dir, identity, recipient)
        result["tracemalloc_peak_bytes"][str(size)] = peaks
        print(common.size_name(size), peaks, file=sys.stderr)
    common.save("stream", result)


if __name__ == "__main__":
    main()
