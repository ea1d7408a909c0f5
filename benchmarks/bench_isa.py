"""One core, the kernels as built for this process's CPU class against cryptography, in interleaved rounds.

    python benchmarks/bench_isa.py --rounds 9
    NUMBA_CACHE_DIR=/tmp/k-avx2 NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES=... \\
        OPENSSL_ia32cap=":~0xD0230000" python benchmarks/bench_isa.py     (another class: issue 26's table)

Workloads, each sealed and opened with every tag verified: 128 MiB of 64 KiB
age chunks (agefast.kernels in one call with threads=1; cryptography's
encrypt_into / decrypt_into chunk by chunk into a preallocated buffer), and one
64 KiB chunk per call. Each round times every case once, in a rotating order;
the table gives each case's best round and the median over rounds of the
per-round ratio. The build's instruction set is kernels.isa(); OPENSSL_ia32cap,
if set, restricts cryptography's OpenSSL the same way (it is read when
cryptography loads it).
"""

import argparse
import os
import statistics
import struct
import time

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from agefast import kernels

CHUNK = kernels.CHUNK_SIZE
SEALED = kernels.SEALED_CHUNK_SIZE
KEY = bytes(range(32))


def crypto(seal, src, dst):
    aead = ChaCha20Poly1305(KEY)
    run = aead.encrypt_into if seal else aead.decrypt_into
    step, out = (CHUNK, SEALED) if seal else (SEALED, CHUNK)
    nonce = bytearray(12)
    s, d = memoryview(src), memoryview(dst)
    count = -(-len(src) // step)
    for i in range(count):
        struct.pack_into(">QB", nonce, 3, i, 1 if i == count - 1 else 0)
        run(nonce, s[i * step:(i + 1) * step], None, d[i * out:(i + 1) * out])


def cases(size):
    plain = os.urandom(size)
    sealed = bytearray(size + size // CHUNK * 16)
    crypto(True, plain, sealed)
    sealed = bytes(sealed)
    out_sealed, out_plain = bytearray(len(sealed)), bytearray(size)
    chunks = size // CHUNK

    def agefast_seal():
        kernels.seal_chunks(KEY, 0, plain, out_sealed, True, threads=1)

    def agefast_open():
        if kernels.open_chunks(KEY, 0, sealed, out_plain, True, threads=1) != chunks:
            raise AssertionError("a chunk did not verify")

    return {"cryptography seal": lambda: crypto(True, plain, out_sealed),
            "agefast seal": agefast_seal,
            "cryptography open": lambda: crypto(False, sealed, out_plain),
            "agefast open": agefast_open}


def rounds_of(work, rounds, repeat):
    """{case: [seconds per round]}, each a call of the case `repeat` times."""
    names = list(work)
    times = {name: [] for name in names}
    for name in names:
        work[name]()        # page faults, first calls
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            t0 = time.perf_counter()
            for _ in range(repeat):
                work[name]()
            times[name].append(time.perf_counter() - t0)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--mib", type=int, default=128)
    args = parser.parse_args()
    kernels.warm_up()
    print(f"isa {kernels.isa()}  OPENSSL_ia32cap={os.environ.get('OPENSSL_ia32cap', '')!r}  "
          f"load {os.getloadavg()[0]:.2f}")
    for label, size, repeat in ((f"{args.mib} MiB", args.mib << 20, 1), ("64 KiB per call", CHUNK, 2000)):
        times = rounds_of(cases(size), args.rounds, repeat)
        for op in ("seal", "open"):
            ours, theirs = times[f"agefast {op}"], times[f"cryptography {op}"]
            ratio = statistics.median(t / o for o, t in zip(ours, theirs))
            print(f"{label:16} {op}: agefast {size * repeat / min(ours) / 1e9:.2f} GB/s  cryptography "
                  f"{size * repeat / min(theirs) / 1e9:.2f} GB/s  best {min(theirs) / min(ours):.2f}x  "
                  f"median of rounds {ratio:.2f}x")
    print(f"load at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
