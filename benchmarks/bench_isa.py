"""The kernels as built for a CPU class against cryptography restricted to the same instructions, in interleaved rounds.

    python benchmarks/bench_isa.py --rounds 9              (this process's class)
    python benchmarks/bench_isa.py --classes --rounds 9    (issue 26's table: every class this CPU runs;
                                                            saved in benchmarks/results/isa.json)
    python benchmarks/bench_isa.py --classes --forms       (each class in every form of the batch kernel)
    python benchmarks/bench_isa.py --classes --cpus alderlake,znver3   (each class tuned for other CPUs too)
    python benchmarks/bench_isa.py --classes --processes 5 (each class's medians over 5 processes)

Workloads, each sealed and opened with every tag verified: 128 MiB of 64 KiB
age chunks (agefast.kernels in one call with threads=1, and with threads=2
where the machine has two CPUs; cryptography's encrypt_into / decrypt_into
chunk by chunk into a preallocated buffer, on one core), and one 64 KiB chunk
per call. Beside them the limit: ChaCha20 alone (cryptography's
algorithms.ChaCha20, one stream written by update_into in the same 64 KiB
pieces, the same OpenSSL), which an AEAD whose MAC costs nothing would
match. Each round times every case once, in a rotating order; the table
gives each case's best round and the median over rounds of the per-round
ratio, to OpenSSL's AEAD and to the cipher alone (and of two threads to one).
The build's instruction set is kernels.isa(), and which build it is is
printed too (a class's shipped library, or the cache's compile, as in an
editable install, with the CPU name it was emitted for); OPENSSL_ia32cap, if
set, restricts cryptography's OpenSSL the same way (it is read when
cryptography loads it).

--classes measures each x86 class agefast ships (agefast.kernels._shipped)
that this CPU can run, each in a process of its own: the kernels compiled
for the class's Numba target (NUMBA_CPU_NAME and NUMBA_CPU_FEATURES; the
kernel cache keeps each target apart, and the first run compiles it) and
OpenSSL masked to the same instructions (_OPENSSL_MASKS). A class this CPU
cannot run is listed as such. With --forms each class is measured in every
form of its batch kernel (AGEFAST_KERNEL_FORM, agefast.kernels._common.FORMS):
two passes, stitched (8 blocks in ymm per iteration on AVX2, 16 in zmm on
AVX-512) and split (the stitched loop hashing half of each step, the lanes
the rest), to choose its form by what it measures: a last line per class
names the fastest form, which agefast.kernels._common._form() should give it.
With --processes N each build is measured in N processes of its own, one
after the other: where a process's buffers land in memory moves its figures
by up to 3% (benchmarks/HISTORY.md, issue 46), so the table then gives each
figure's median over the processes, and the ratio to the cipher alone also
as the lowest and highest process's.
With --cpus each class is also emitted for each CPU name listed (LLVM's
scheduling model and tuning; the instructions stay the class's: the listed
extensions beyond it that this CPU has are switched off, _BEYOND, so a
name implies none of them), to choose the name a class is built for
(_shipped.CLASSES): the last line per class names the fastest build.
"""

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

import common
from agefast import kernels
from agefast.kernels import _common, _loader

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


def cipher_alone(src, dst):
    """ChaCha20 without the MAC, one stream over `src` in 64 KiB pieces: what the AEAD costs
    if Poly1305 and the loop around it cost nothing, on the same instructions as OpenSSL's AEAD."""
    stream = Cipher(algorithms.ChaCha20(KEY, bytes(16)), mode=None).encryptor()
    s, d = memoryview(src), memoryview(dst)

    def run():
        for i in range(0, len(src), CHUNK):
            stream.update_into(s[i:i + CHUNK], d[i:i + CHUNK])
    return run


def cases(size, two_threads):
    plain = os.urandom(size)
    sealed = bytearray(size + size // CHUNK * 16)
    crypto(True, plain, sealed)
    sealed = bytes(sealed)
    out_sealed, out_plain = bytearray(len(sealed)), bytearray(size)
    chunks = size // CHUNK

    def agefast_seal(threads):
        return lambda: kernels.seal_chunks(KEY, 0, plain, out_sealed, True, threads=threads)

    def agefast_open(threads):
        def run():
            if kernels.open_chunks(KEY, 0, sealed, out_plain, True, threads=threads) != chunks:
                raise AssertionError("a chunk did not verify")
        return run

    work = {"cryptography seal": lambda: crypto(True, plain, out_sealed),
            "agefast seal": agefast_seal(1),
            "cryptography open": lambda: crypto(False, sealed, out_plain),
            "agefast open": agefast_open(1),
            "cipher alone": cipher_alone(plain, bytearray(size))}
    if two_threads:
        work |= {"agefast 2 threads seal": agefast_seal(2), "agefast 2 threads open": agefast_open(2)}
    if size == CHUNK:
        work |= {"agefast kernel call seal": common.kernel_call(KEY, 0, plain, out_sealed, True, seal=True),
                 "agefast kernel call open": common.kernel_call(KEY, 0, sealed, out_plain, True, seal=False)}
    return work


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


def measure(rounds, mib):
    """[{workload, op, agefast, cryptography and cipher alone GB/s, best and median ratio to
    cryptography, median ratio to the cipher alone}] for this process's build."""
    kernels.warm_up()
    rows = []
    two_threads = len(os.sched_getaffinity(0)) >= 2
    for label, size, repeat in ((f"{mib} MiB", mib << 20, 1), ("64 KiB per call", CHUNK, 2000)):
        times = rounds_of(cases(size, two_threads and repeat == 1), rounds, repeat)
        for who, suffix in (("agefast", ""), ("agefast 2 threads", ", 2 threads"),
                            ("agefast kernel call", ", the kernel call alone")):
            for op in ("seal", "open"):
                if f"{who} {op}" not in times:
                    continue
                ours, theirs, limit = times[f"{who} {op}"], times[f"cryptography {op}"], times["cipher alone"]
                rows.append({"workload": label + suffix, "op": op,
                             "agefast_gb_s": size * repeat / min(ours) / 1e9,
                             "cryptography_gb_s": size * repeat / min(theirs) / 1e9,
                             "best": min(theirs) / min(ours),
                             "median": statistics.median(t / o for o, t in zip(ours, theirs)),
                             "cipher_alone_gb_s": size * repeat / min(limit) / 1e9,
                             "cipher_alone_median": statistics.median(c / o for o, c in zip(ours, limit))})
                if who == "agefast 2 threads":      # issue 46: two threads against one, per round
                    rows[-1]["one_thread_median"] = statistics.median(
                        one / o for o, one in zip(ours, times[f"agefast {op}"]))
    return rows


def print_rows(rows):
    for row in rows:
        print(f"{row['workload']:26} {row['op']}: agefast {row['agefast_gb_s']:.2f} GB/s  cryptography "
              f"{row['cryptography_gb_s']:.2f} GB/s  best {row['best']:.2f}x  median of rounds {row['median']:.2f}x  "
              f"cipher alone {row['cipher_alone_gb_s']:.2f} GB/s, median {row['cipher_alone_median']:.2f}x of it"
              + (f"  {row['one_thread_median']:.2f}x one thread" if "one_thread_median" in row else ""))


# What keeps cryptography's OpenSSL to a class's instructions: OPENSSL_ia32cap
# clears bits of CPUID leaf 7's EBX (after the colon): AVX-512 F (bit 16), DQ
# (17), IFMA (21), CD (28), BW (30), VL (31) for AVX2 alone; IFMA for AVX-512F.
# The IFMA class takes OpenSSL as it is, the variable unset: an empty value is
# read as no CPU features at all (OpenSSL's C code, 0.55 GB/s on Zen 4 where
# its assembly does 3.2).
_OPENSSL_MASKS = {"avx512f": ":~0x00200000", "avx2": ":~0xD0230000"}


# Instruction set extensions beyond the classes. A CPU name implies its own
# (`znver4` AVX-512, `alderlake` AVX-VNNI, GFNI, VAES): a class emitted for
# another CPU's name has those of them this CPU has switched off, so only the
# tuning differs. `znver4` with the avx2 class's features and no such list
# emitted AVX-512VL rotates (vprold).
_BEYOND = ("avx512f", "avx512ifma", "avx512vbmi", "avx512vbmi2", "avx512vnni", "avx512bitalg", "avx512vpopcntdq",
           "avx512bf16", "avx512fp16", "avxvnni", "avxifma", "avxvnniint8", "avxneconvert", "gfni", "vaes",
           "vpclmulqdq", "sha")


def features_for(cpu_class, cpu):
    """The features the class is compiled with when emitted for `cpu`: as shipped for its own name,
    else with the extensions of _BEYOND this CPU has and the class lacks switched off."""
    if cpu == cpu_class.cpu:
        return cpu_class.features
    import llvmlite.binding as ll

    have = {f[1:] for f in ll.get_host_cpu_features().flatten().split(",") if f.startswith("+")}
    own = {f[1:] for f in cpu_class.features.split(",")}
    return ",".join([cpu_class.features, *(f"-{f}" for f in _BEYOND if f in have and f not in own)])


def merged(results):
    """One result from the same measurement in several processes: each row's figures the medians over
    the processes, and the ratio to the cipher alone also as the lowest and highest process's."""
    if len(results) == 1:
        return results[0]
    rows = []
    for same in zip(*(result["rows"] for result in results)):
        row = {key: statistics.median(r[key] for r in same) if isinstance(value, float) else value
               for key, value in same[0].items()}
        row["cipher_alone_range"] = [min(r["cipher_alone_median"] for r in same),
                                     max(r["cipher_alone_median"] for r in same)]
        rows.append(row)
    return {"isa": results[0]["isa"], "load": [results[0]["load"][0], results[-1]["load"][1]],
            "processes": len(results), "rows": rows}


def each_class(rounds, mib, forms, cpus, processes=1):
    """Measure every x86 class this CPU runs, each in `processes` processes of its own: one per form of
    `forms` ("" for the class's own) and CPU name (the class's own, then each of `cpus`); print one table."""
    from agefast.kernels import _shipped

    flags = _shipped.host_flags()
    table = []
    for cpu_class in _shipped.CLASSES:
        if cpu_class.machine != os.uname().machine:
            continue
        mask = _OPENSSL_MASKS.get(_loader._isa_of(cpu_class.features), "")     # by its instructions
        missing = sorted(_shipped.required_flags(cpu_class) - flags)
        if missing:
            table.append((cpu_class, cpu_class.cpu, "", mask, None, f"this CPU lacks {', '.join(missing)}"))
            continue
        for cpu in dict.fromkeys((cpu_class.cpu, *cpus)):
            for form in forms if not cpu_class.form else ("",):     # a class of its own form: that one
                env = {**os.environ, "NUMBA_CPU_NAME": cpu, "NUMBA_CPU_FEATURES": features_for(cpu_class, cpu),
                       "OPENSSL_ia32cap": mask, "AGEFAST_KERNEL_FORM": form or cpu_class.form}
                if not mask:
                    del env["OPENSSL_ia32cap"]
                print(f"{cpu_class.name} for {cpu} {form or '(its own form)'}: measuring "
                      "(the first run compiles the class)", flush=True)
                results = []
                for _ in range(processes):
                    done = subprocess.run([sys.executable, __file__, "--rounds", str(rounds), "--mib", str(mib),
                                           "--json"], env=env, stdout=subprocess.PIPE, text=True, check=True)
                    results.append(json.loads(done.stdout.splitlines()[-1]))
                    print_rows(results[-1]["rows"])
                table.append((cpu_class, cpu, form, mask, merged(results), ""))
    print()
    if processes > 1:
        print(f"Each figure the median over {processes} processes; beside the ratio to the cipher alone, "
              "the lowest and highest process's.")
    print("| class | build | form | OpenSSL_ia32cap | workload | seal: agefast / OpenSSL GB/s, best, median | open "
          "| cipher alone GB/s | seal / open to the cipher alone, median |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cpu_class, cpu, form, mask, result, why in table:
        head = f"| {cpu_class.name} | {cpu} | {form or 'its own'} | `{mask or '(none)'}` |"
        if result is None:
            print(f"{head} not measured: {why} | | | | |")
            continue
        by = {}
        for row in result["rows"]:
            by.setdefault(row["workload"], {})[row["op"]] = row
        for workload, ops in by.items():
            cells = [f"{r['agefast_gb_s']:.2f} / {r['cryptography_gb_s']:.2f}, **{r['best']:.2f}x**, {r['median']:.2f}x"
                     for r in (ops["seal"], ops["open"])]
            limit = (f"{ops['seal']['cipher_alone_gb_s']:.2f} | "
                     + " / ".join(f"{r['cipher_alone_median']:.2f}x" + (
                         " ({:.2f}-{:.2f})".format(*r["cipher_alone_range"]) if "cipher_alone_range" in r else "")
                         for r in (ops["seal"], ops["open"])))
            print(f"{head} {workload} | {cells[0]} | {cells[1]} | {limit} |")
    if len(forms) > 1 or cpus:
        print_fastest(table, mib, len(forms) > 1, bool(cpus))
    return [{"class": cpu_class.name, "cpu": cpu, "form": form or None, "openssl_ia32cap": mask or None,
             "not_measured": why or None, **(result or {})}
            for cpu_class, cpu, form, mask, result, why in table]


def print_fastest(table, mib, by_form, by_cpu):
    """Each class's fastest build (its form, its CPU name, or both: what was varied) by the highest
    mean of its median ratios on one thread (seal and open, the whole buffer and one chunk per
    call): the form _common._form() and the name _shipped.CLASSES should give it."""
    print()
    ratios = {}
    for cpu_class, cpu, form, _, result, _ in table:
        if result is not None:
            label = " ".join(([f"form {form or '(its own)'}"] if by_form else []) + ([f"for {cpu}"] if by_cpu else []))
            ratios.setdefault(cpu_class.name, {})[label] = statistics.mean(
                r["median"] for r in result["rows"] if r["workload"] in (f"{mib} MiB", "64 KiB per call"))
    for name, by_build in ratios.items():
        print(f"{name}: fastest {max(by_build, key=by_build.get)} ("
              + ", ".join(f"{build} {ratio:.2f}x" for build, ratio in by_build.items())
              + f"; mean of the medians of seal and open, {mib} MiB and 64 KiB per call, one thread)")


def build():
    """Which build of the kernels this process runs (once they are loaded): a class's library
    shipped with the package, else the cache's (an editable install's), with the CPU name it was
    emitted for (NUMBA_CPU_NAME, else its class's: agefast.kernels._build._object_cpu)."""
    from agefast.kernels import _cache, _shipped

    found = _shipped.verified()
    if not isinstance(found, str):
        return f"shipped {found[0].name}"
    entry = _cache.lookup(_cache.key())
    return f"the cache's, compiled for {entry[2]['cpu']}" if entry else "compiled in this process, not cached"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--mib", type=int, default=128)
    parser.add_argument("--classes", action="store_true", help="every class this CPU runs, one process each")
    parser.add_argument("--forms", action="store_true", help="with --classes: each class in every form")
    parser.add_argument("--cpus", default="", help="with --classes: each class emitted for these CPU names too")
    parser.add_argument("--processes", type=int, default=1,
                        help="with --classes: each build measured in this many processes, medians over them")
    parser.add_argument("--json", action="store_true", help="end with the results as one line of JSON")
    args = parser.parse_args()
    if args.classes:
        print(f"{common.cpu_named()}  load {os.getloadavg()[0]:.2f}")
        processes = max(1, args.processes)
        classes = each_class(args.rounds, args.mib, _common.FORMS if args.forms else ("",),
                             tuple(name for name in args.cpus.split(",") if name), processes)
        print(f"load at end {os.getloadavg()[0]:.2f}")
        common.save("isa", {"rounds": args.rounds, "mib": args.mib, "processes": processes, "classes": classes})
        return
    load = os.getloadavg()[0]
    rows = measure(args.rounds, args.mib)
    print(common.cpu_named())
    print(f"isa {kernels.isa()}  build {build()}  form {os.environ.get('AGEFAST_KERNEL_FORM') or '(its own)'}  "
          f"OPENSSL_ia32cap {repr(os.environ['OPENSSL_ia32cap']) if 'OPENSSL_ia32cap' in os.environ else '(unset)'}  "
          f"load {load:.2f}")
    print_rows(rows)
    print(f"load at end {os.getloadavg()[0]:.2f}")
    if args.json:
        print(json.dumps({"isa": kernels.isa(), "load": [load, os.getloadavg()[0]], "rows": rows}))


if __name__ == "__main__":
    main()
