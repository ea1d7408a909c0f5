"""agefast against cryptography, pyrage and the Go age command, under pyperf.

pyperf runs every benchmark in fresh worker processes, calibrates the loops
and reports mean ± std; each benchmark also carries the perfprof reading of
one run in its metadata (task-clock, page faults and context switches here;
hardware counters with the reason they are missing, never as 0).

    python benchmarks/bench_pyperf.py --fast -o benchmarks/results/pyperf.json
    python -m pyperf compare_to benchmarks/results/pyperf.json --table  (or: pyperf show)

In memory, every case seals the same 16 MiB STREAM with verified output:
agefast.encrypt/decrypt at one thread, pyrage.encrypt/decrypt, and the same
STREAM done chunk by chunk with cryptography's encrypt_into/decrypt_into into
a preallocated buffer. The commands encrypt and decrypt a page-cached 64 MiB
file with `agefast` and Go's `age`.
"""

import os
import struct
import subprocess
import sys
from pathlib import Path

import pyperf
import pyrage
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

import agefast
import perfprof

WORK = Path(os.environ.get("AGEFAST_BENCH_DIR", "/tmp/agefast-pyperf"))
AGE, KEYGEN = "/usr/bin/age", "/usr/bin/age-keygen"
AGEFAST = str(Path(sys.executable).with_name("agefast"))
MEMORY = 16 << 20
FILE = 64 << 20
CHUNK, TAG = 64 * 1024, 16
EVENTS = ["task-clock", "page-faults", "context-switches", "cycles", "instructions"]


def setup():
    """Inputs and a key, made once and reused by every pyperf worker."""
    WORK.mkdir(parents=True, exist_ok=True)
    key, plain, sealed = WORK / "key.txt", WORK / "plain", WORK / "sealed"
    if not key.exists():
        subprocess.run([KEYGEN, "-o", str(key)], check=True, capture_output=True)
    if not plain.exists() or plain.stat().st_size != FILE:
        plain.write_bytes(os.urandom(FILE))
    recipient = subprocess.run([KEYGEN, "-y", str(key)], check=True, capture_output=True,
                               text=True).stdout.strip()
    if not sealed.exists():
        subprocess.run([AGE, "-r", recipient, "-o", str(sealed), str(plain)], check=True)
    return key, recipient, plain, sealed


def reading_of(fn, *args) -> dict:
    with perfprof.Profiler(EVENTS, inherit=True) as prof:
        fn(*args)
    reading = prof.read()
    return {f"perfprof {name}": (reading[name] if reading[name] is not None else reading.reasons[name])
            for name in EVENTS}


def cryptography_stream(key: bytes, src: memoryview, dst: memoryview, seal: bool) -> None:
    """The age STREAM, chunk by chunk, into a buffer allocated once."""
    aead = ChaCha20Poly1305(key)
    nonce = bytearray(12)
    step_in, step_out = (CHUNK, CHUNK + TAG) if seal else (CHUNK + TAG, CHUNK)
    chunks = -(-len(src) // step_in)
    for i in range(chunks):
        struct.pack_into(">QB", nonce, 3, i, 1 if i == chunks - 1 else 0)
        piece = src[i * step_in:(i + 1) * step_in]
        out = dst[i * step_out:i * step_out + len(piece) + (TAG if seal else -TAG)]
        (aead.encrypt_into if seal else aead.decrypt_into)(nonce, piece, None, out)


def main() -> None:
    runner = pyperf.Runner()
    key, recipient, plain, sealed = setup()
    out = str(WORK / "out")
    data = os.urandom(MEMORY)
    ag_id = agefast.parse_identities(key.read_text())
    ag_rcp = agefast.parse_recipients(recipient)
    py_id = [pyrage.x25519.Identity.from_str(str(ag_id[0]))]
    py_rcp = [pyrage.x25519.Recipient.from_str(recipient)]
    ag_ct = agefast.encrypt(data, ag_rcp)
    py_ct = pyrage.encrypt(data, py_rcp)
    if agefast.decrypt(py_ct, ag_id) != data or pyrage.decrypt(ag_ct, py_id) != data:
        raise RuntimeError("agefast and pyrage disagree")

    stream_key = os.urandom(32)
    sealed_buf = memoryview(bytearray(MEMORY + (MEMORY // CHUNK) * TAG))
    plain_buf = memoryview(bytearray(MEMORY))
    cryptography_stream(stream_key, memoryview(data), sealed_buf, True)

    funcs = {
        "encrypt 16 MiB: agefast.encrypt (1 thread)": (lambda: agefast.encrypt(data, ag_rcp, threads=1),),
        "encrypt 16 MiB: pyrage.encrypt": (lambda: pyrage.encrypt(data, py_rcp),),
        "encrypt 16 MiB: cryptography STREAM into a reused buffer":
            (lambda: cryptography_stream(stream_key, memoryview(data), sealed_buf, True),),
        "decrypt 16 MiB: agefast.decrypt (1 thread)": (lambda: agefast.decrypt(ag_ct, ag_id, threads=1),),
        "decrypt 16 MiB: pyrage.decrypt": (lambda: pyrage.decrypt(py_ct, py_id),),
        "decrypt 16 MiB: cryptography STREAM into a reused buffer":
            (lambda: cryptography_stream(stream_key, sealed_buf, plain_buf, False),),
    }
    for name, (fn,) in funcs.items():
        runner.bench_func(name, fn, metadata=reading_of(fn))

    commands = {
        "encrypt 64 MiB file: agefast command": [AGEFAST, "-r", recipient, "-o", out, str(plain)],
        "encrypt 64 MiB file: Go age command": [AGE, "-r", recipient, "-o", out, str(plain)],
        "decrypt 64 MiB file: agefast command": [AGEFAST, "-d", "-i", str(key), "-o", out, str(sealed)],
        "decrypt 64 MiB file: Go age command": [AGE, "-d", "-i", str(key), "-o", out, str(sealed)],
    }
    verify_commands(commands, key, recipient, plain, out)
    for name, argv in commands.items():
        runner.bench_command(name, argv)


def verify_commands(commands: dict, key: Path, recipient: str, plain: Path, out: str) -> None:
    """Each command once, its output checked by the other tool, before any timing."""
    expected = plain.read_bytes()
    for name, argv in commands.items():
        subprocess.run(argv, check=True)
        got = Path(out).read_bytes()
        if name.startswith("encrypt"):
            got = subprocess.run([AGE, "-d", "-i", str(key), out], check=True, capture_output=True).stdout
        if got != expected:
            raise RuntimeError(f"{name} produced a wrong result")


if __name__ == "__main__":
    main()
