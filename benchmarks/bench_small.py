"""Small messages in process: microseconds per call against pyrage and the primitives' floor.

For every size, interleaved round by round: agefast.encrypt/decrypt,
pyrage.encrypt/decrypt, the primitives case of bench_sizes.py (the
header's primitives and the bare STREAM loop, nothing around them), and up to
one chunk "flat": a whole age file for one X25519 recipient made or read by
one straight function, every check age makes but nothing else, the least
Python a call can have around the primitives. Each case
times CALLS calls one by one and keeps their median: a call that another
process preempted (the cores here are shared) is dropped instead of being
averaged in, which bench_sizes.py's samples of many calls cannot do. Reported:
the median over rounds of each case's median, the median of the per-round
ratios pyrage/agefast (and pyrage/flat), and agefast's and flat's time above
the primitives.

With --recipient ssh-ed25519 the files are for an ssh-ed25519 key instead,
and only agefast and pyrage are timed.

With --case pread the case is random access instead: `decryptor(file).pread` of
one 64 KiB chunk of a 64 MiB file (whose size has the kernels loaded)
against cryptography's ChaCha20Poly1305.decrypt of the same sealed chunk in
memory, and against cryptography reading it (os.pread) and decrypting it;
the floor in the same rounds is the compiled open of the chunk alone (one
ctypes call on buffers lent once) plus reading it.
With --case armored the files are armored: agefast.encrypt(armored=True) and
decrypt against pyrage's, with agefast's binary call of the same size in the
same rounds (what the armor costs above it); --sizes may go up to 65536 KiB.
With --case files the calls are agefast.encrypt_file / decrypt_file against
pyrage's, each call writing a new file in --dir (whose file system decides
much of it: /dev/shm for the Python around the files), with "in memory" in
the same rounds: the input read, agefast.encrypt / decrypt, the output
written to a new file with open(path, "xb") (agefast's output instead
appears whole or not at all, and a kill leaves no partial file). Each
case's outputs are removed after its calls in a round.
With --case lone, kernels.open_chunk of one chunk of each size (1, 4, 16, 32
and 64 KiB unless --sizes) against the same decrypt: where a chunk opened on
its own goes to loaded kernels (payload.engine.LONE_KERNEL_MIN).

    python benchmarks/bench_small.py [--sizes KiB,KiB,...] [--reps N] [--recipient x25519|ssh-ed25519]
    python benchmarks/bench_small.py --case armored [--sizes KiB,KiB,...] [--reps N]
    python benchmarks/bench_small.py --case files [--sizes KiB,KiB,...] [--reps N] [--dir DIR]
    python benchmarks/bench_small.py --case pread|lone [--reps N]
"""

import hmac
import itertools
import os
import pathlib
import shutil
import statistics
import sys
import time

import agefast
import pyrage
from agefast.format.grammar import b64decode, b64encode
from agefast.primitives import hkdf, hmac_sha256
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from nacl.bindings import crypto_scalarmult, crypto_scalarmult_base

import common
from bench_sizes import CHUNK, X25519_INFO, ZERO_NONCE, AgeFile, Keys, sealed_size, stream_open, stream_seal

CALLS = 200
VERSION_LINE = b"age-encryption.org/v1\n"
LONE_CHUNK_NONCE = bytes(11) + b"\x01"
ARGUMENT_BYTES = bytes(range(32, 127))


def flat_encrypt(data: bytes, recipient: bytes) -> bytes:
    """An age file of `data` (one chunk) for one X25519 recipient, in one straight function."""
    file_key = os.urandom(16)
    scalar = os.urandom(32)
    share = crypto_scalarmult_base(scalar)
    wrap_key = hkdf(crypto_scalarmult(scalar, recipient), share + recipient, X25519_INFO)
    body = ChaCha20Poly1305(wrap_key).encrypt(ZERO_NONCE, file_key, None)
    header = b"%s-> X25519 %s\n%s\n---" % (VERSION_LINE, b64encode(share).encode(), b64encode(body).encode())
    mac = hmac_sha256(hkdf(file_key, b"", b"header"), header)
    nonce = os.urandom(16)
    key = hmac_sha256(hmac_sha256(nonce, file_key), b"payload\x01")
    return b"".join((header, b" ", b64encode(mac).encode(), b"\n", nonce,
                     ChaCha20Poly1305(key).encrypt(LONE_CHUNK_NONCE, data, None)))


def flat_decrypt(sealed: bytes, identity: X25519PrivateKey, public: bytes) -> bytes:
    """The plaintext of an age file of one X25519 stanza and one chunk, in one
    straight function that makes every check age makes of such a file."""
    head = sealed[:4096]
    end = head.find(b"\n---", len(VERSION_LINE) - 1)
    newline = head.find(b"\n", end + 1)
    if not head.startswith(VERSION_LINE) or end < 0 or newline < 0:
        raise ValueError("not an age file of one stanza")
    lines = head[len(VERSION_LINE):newline].split(b"\n")
    if len(lines) != 3:
        raise ValueError("not one stanza")
    stanza, body_line, mac_line = lines
    if not stanza.startswith(b"-> ") or stanza.translate(None, ARGUMENT_BYTES) or len(body_line) >= 64:
        raise ValueError("malformed stanza")
    arguments = stanza[3:].split(b" ")
    if b"" in arguments or len(arguments) != 2 or arguments[0] != b"X25519" or not mac_line.startswith(b"--- "):
        raise ValueError("malformed stanza or MAC line")
    share, body, mac = b64decode(arguments[1]), b64decode(body_line), b64decode(mac_line[4:])
    if len(share) != 32 or len(body) != 32 or len(mac) != 32:
        raise ValueError("wrong sizes")
    wrap_key = hkdf(identity.exchange(X25519PublicKey.from_public_bytes(share)), share + public, X25519_INFO)
    file_key = ChaCha20Poly1305(wrap_key).decrypt(ZERO_NONCE, body, None)
    if not hmac.compare_digest(hmac_sha256(hkdf(file_key, b"", b"header"), head[:end + 4]), mac):
        raise InvalidSignature("header MAC")
    nonce = sealed[newline + 1:newline + 17]
    key = hmac_sha256(hmac_sha256(nonce, file_key), b"payload\x01")
    return ChaCha20Poly1305(key).decrypt(LONE_CHUNK_NONCE, memoryview(sealed)[newline + 17:], None)


def per_call_median(fn) -> float:
    times = []
    for _ in range(CALLS):
        start = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1000


def x25519_cases(size: int, keys: Keys) -> dict:
    """{op: {case: callable}} for a file of `size` bytes to one X25519 recipient."""
    data = os.urandom(size)
    age_file = AgeFile(keys, data)
    key, start, sealed = age_file.key, age_file.start, age_file.sealed
    ceiling_out = memoryview(bytearray(sealed_size(size)))
    ceiling_plain = memoryview(bytearray(size))
    if (pyrage.decrypt(agefast.encrypt(data, keys.recipients), [keys.py_identity]) != data
            or agefast.decrypt(sealed, keys.identities) != data):
        raise SystemExit(f"{common.size_name(size)}: agefast does not round-trip with pyrage")
    cases = {
        "encrypt": {
            "agefast": lambda: agefast.encrypt(data, keys.recipients),
            "pyrage": lambda: pyrage.encrypt(data, [keys.py_recipient]),
            "primitives": lambda: (age_file.encrypt_primitives(keys),
                                   stream_seal(key, memoryview(data), ceiling_out)),
        },
        "decrypt": {
            "agefast": lambda: agefast.decrypt(sealed, keys.identities),
            "pyrage": lambda: pyrage.decrypt(sealed, [keys.py_identity]),
            "primitives": lambda: (age_file.decrypt_primitives(keys),
                                   stream_open(key, memoryview(sealed)[start:], ceiling_plain)),
        },
    }
    if size <= CHUNK:
        if (pyrage.decrypt(flat_encrypt(data, keys.x25519_public), [keys.py_identity]) != data
                or flat_decrypt(sealed, keys.x25519_key, keys.x25519_public) != data):
            raise SystemExit(f"{common.size_name(size)}: the flat functions do not round-trip with pyrage")
        cases["encrypt"]["flat"] = lambda: flat_encrypt(data, keys.x25519_public)
        cases["decrypt"]["flat"] = lambda: flat_decrypt(sealed, keys.x25519_key, keys.x25519_public)
    return cases


def armored_cases(size: int, keys: Keys) -> dict:
    """{op: {case: callable}}: armored files of `size` bytes to one X25519 recipient, against pyrage, with
    agefast's binary call of the same plaintext beside them."""
    data = os.urandom(size)
    ours, theirs = keys.recipients, [keys.py_recipient]
    text, binary = pyrage.encrypt(data, theirs, armored=True), agefast.encrypt(data, ours)
    if (pyrage.decrypt(agefast.encrypt(data, ours, armored=True), [keys.py_identity]) != data
            or agefast.decrypt(text, keys.identities) != data):
        raise SystemExit(f"{common.size_name(size)}: agefast's armor does not round-trip with pyrage")
    return {"encrypt": {"agefast": lambda: agefast.encrypt(data, ours, armored=True),
                        "pyrage": lambda: pyrage.encrypt(data, theirs, armored=True),
                        "agefast binary": lambda: agefast.encrypt(data, ours)},
            "decrypt": {"agefast": lambda: agefast.decrypt(text, keys.identities),
                        "pyrage": lambda: pyrage.decrypt(text, [keys.py_identity]),
                        "agefast binary": lambda: agefast.decrypt(binary, keys.identities)}}


def files_cases(size: int, keys: Keys, directory) -> dict:
    """{op: {case: callable}}: a file of `size` bytes to one X25519 recipient and back, file to new file, against
    pyrage's, with the same work in memory between plainly written files beside them."""
    data = os.urandom(size)
    plain, sealed = os.path.join(directory, "small-plain"), os.path.join(directory, "small-sealed")
    with open(plain, "wb") as f:
        f.write(data)
    with open(sealed, "wb") as f:
        f.write(pyrage.encrypt(data, [keys.py_recipient]))
    outputs = os.path.join(directory, "small-outputs")
    os.makedirs(outputs, exist_ok=True)
    names = itertools.count()

    def new() -> str:
        return os.path.join(outputs, str(next(names)))

    def in_memory(path: str, work) -> None:
        with open(path, "rb") as f:
            text = f.read()
        with open(new(), "xb") as f:
            f.write(work(text))

    check = new()
    agefast.encrypt_file(plain, check, keys.recipients)
    if pyrage.decrypt(open(check, "rb").read(), [keys.py_identity]) != data:
        raise SystemExit(f"{common.size_name(size)}: agefast's file does not open with pyrage")
    return {"encrypt": {"agefast": lambda: agefast.encrypt_file(plain, new(), keys.recipients),
                        "pyrage": lambda: pyrage.encrypt_file(plain, new(), [keys.py_recipient]),
                        "in memory": lambda: in_memory(plain, lambda b: agefast.encrypt(b, keys.recipients))},
            "decrypt": {"agefast": lambda: agefast.decrypt_file(sealed, new(), keys.identities),
                        "pyrage": lambda: pyrage.decrypt_file(sealed, new(), [keys.py_identity]),
                        "in memory": lambda: in_memory(sealed, lambda b: agefast.decrypt(b, keys.identities))}}


def ssh_cases(size: int) -> dict:
    """{op: {case: callable}} for a file of `size` bytes to a new ssh-ed25519 key, agefast and pyrage only."""
    private = ed25519.Ed25519PrivateKey.generate()
    pem = private.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption())
    line = private.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode("ascii")
    ours, our_identity = agefast.ssh.Recipient.from_str(line), agefast.ssh.Identity.from_buffer(pem)
    theirs, their_identity = pyrage.ssh.Recipient.from_str(line), pyrage.ssh.Identity.from_buffer(pem)
    data = os.urandom(size)
    sealed = pyrage.encrypt(data, [theirs])
    if (pyrage.decrypt(agefast.encrypt(data, [ours]), [their_identity]) != data
            or agefast.decrypt(sealed, [our_identity]) != data):
        raise SystemExit(f"{common.size_name(size)}: agefast does not round-trip with pyrage")
    return {"encrypt": {"agefast": lambda: agefast.encrypt(data, [ours]),
                        "pyrage": lambda: pyrage.encrypt(data, [theirs])},
            "decrypt": {"agefast": lambda: agefast.decrypt(sealed, [our_identity]),
                        "pyrage": lambda: pyrage.decrypt(sealed, [their_identity])}}


def pread_cases(keys: Keys, directory) -> dict:
    """{"pread": {case: callable}}: one 64 KiB chunk of a 64 MiB file, agefast's pread against cryptography."""
    data = os.urandom(64 << 20)
    age_file = AgeFile(keys, data)
    path = os.path.join(directory, "pread.age")
    with open(path, "wb") as f:
        f.write(age_file.sealed)
    src = open(path, "rb")
    reader = agefast.decryptor(src, keys.identities)
    index = 100
    at = age_file.start + index * (CHUNK + 16)
    sealed = age_file.sealed[at:at + CHUNK + 16]
    aead = ChaCha20Poly1305(age_file.key)
    nonce = index.to_bytes(11, "big") + b"\x00"
    if (reader.pread(index * CHUNK, CHUNK) != data[index * CHUNK:(index + 1) * CHUNK]
            or aead.decrypt(nonce, sealed, None) != data[index * CHUNK:(index + 1) * CHUNK]):
        raise SystemExit("pread: the chunk does not open")
    fd = src.fileno()
    # The floor: what no Python around them can go below, the compiled open of
    # the chunk on buffers lent once (one ctypes call) and the read of it.
    kernel_alone = common.kernel_call(reader._seekable_payload()._key, index, sealed, bytearray(CHUNK), False,
                                      seal=False)
    return {"pread": {"agefast": lambda: reader.pread(index * CHUNK, CHUNK),
                      "cryptography": lambda: ChaCha20Poly1305(age_file.key).decrypt(nonce, sealed, None),
                      "cryptography read": lambda: ChaCha20Poly1305(age_file.key).decrypt(
                          nonce, os.pread(fd, CHUNK + 16, at), None),
                      "the kernel call alone": kernel_alone,
                      "reading the chunk": lambda: os.pread(fd, CHUNK + 16, at)}}


def lone_cases(size: int) -> dict:
    """{"open one chunk": {case: callable}}: kernels.open_chunk against cryptography's decrypt, `size` bytes."""
    from agefast import kernels

    kernels.warm_up()
    key = os.urandom(32)
    data = os.urandom(size)
    sealed = ChaCha20Poly1305(key).encrypt(LONE_CHUNK_NONCE, data, None)
    if kernels.open_chunk(key, 0, sealed, True) != data:
        raise SystemExit("open_chunk does not open cryptography's chunk")
    return {"open one chunk": {"kernels.open_chunk": lambda: kernels.open_chunk(key, 0, sealed, True),
                               "cryptography": lambda: ChaCha20Poly1305(key).decrypt(LONE_CHUNK_NONCE, sealed, None)}}


def empty(folder: pathlib.Path) -> None:
    for entry in os.scandir(folder):
        os.unlink(entry.path)


def one_size(size: int, reps: int, cases: dict, tidy=None) -> dict:
    """Every case of `cases` in `reps` interleaved rounds; tidy(), if given, after each case's calls in a round."""
    result: dict = {"size": size}
    for op, named in cases.items():
        rounds: dict[str, list[float]] = {name: [] for name in named}
        for _ in range(reps):
            for name, fn in named.items():
                rounds[name].append(per_call_median(fn))
                if tidy is not None:
                    tidy()
        us = {n: statistics.median(v) for n, v in rounds.items()}
        if "pyrage" not in named:
            # agefast's case first, then cryptography's: the median of per-round ratios to each
            ours, *theirs = named
            result[op] = {"us_per_call": us, "rounds": rounds}
            line = f"{common.size_name(size):>7} {op}: {ours} {us[ours]:5.2f} us"
            for name in theirs:
                result[op][f"ratio_vs_{name}"] = statistics.median(c / a for c, a in zip(rounds[name], rounds[ours]))
                line += f"; {name} {us[name]:5.2f} us, {result[op][f'ratio_vs_{name}']:.2f}x"
            print(line, flush=True)
            continue
        ratios = [p / a for p, a in zip(rounds["pyrage"], rounds["agefast"])]
        result[op] = {"us_per_call": us, "rounds": rounds, "ratio_vs_pyrage": statistics.median(ratios)}
        line = (f"{common.size_name(size):>7} {op}: agefast {us['agefast']:6.1f} us, pyrage {us['pyrage']:6.1f}; "
                f"pyrage/agefast {result[op]['ratio_vs_pyrage']:.2f}x")
        if "primitives" in rounds:
            result[op]["above_floor_us"] = statistics.median(
                a - f for a, f in zip(rounds["agefast"], rounds["primitives"]))
            line += (f"; primitives {us['primitives']:6.1f} us, "
                     f"agefast above the floor {result[op]['above_floor_us']:.1f} us")
        for floor, what, key in (("agefast binary", "the armor", "above_binary_us"),
                                 ("in memory", "the files", "above_in_memory_us")):
            if floor in rounds:
                result[op][key] = statistics.median(a - b for a, b in zip(rounds["agefast"], rounds[floor]))
                line += f"; {floor} {us[floor]:6.1f} us, {what} {result[op][key]:.1f} us above it"
        if "flat" in rounds:
            result[op]["flat_ratio_vs_pyrage"] = statistics.median(
                p / f for p, f in zip(rounds["pyrage"], rounds["flat"]))
            result[op]["flat_above_floor_us"] = statistics.median(
                f - p for f, p in zip(rounds["flat"], rounds["primitives"]))
            line += (f"; flat {us['flat']:6.1f} us, pyrage/flat {result[op]['flat_ratio_vs_pyrage']:.2f}x, "
                     f"{result[op]['flat_above_floor_us']:.1f} us above the floor")
        print(line, flush=True)
    return result


def main() -> None:
    cases = ("small (messages against pyrage), armored (the same, armored), files (file to new file), pread (one "
             "64 KiB chunk against cryptography's decrypt) or lone (one chunk of each size on the kernels, against "
             "the same)")
    args = common.arguments(__doc__, 9, text_options=[("--sizes", "1,4,16,64", "sizes in KiB, comma-separated"),
                                                      ("--recipient", "x25519", "x25519 or ssh-ed25519"),
                                                      ("--case", "small", cases)])
    if args.recipient not in ("x25519", "ssh-ed25519"):
        raise SystemExit("--recipient: x25519 or ssh-ed25519")
    keys = Keys(args.dir) if args.recipient == "x25519" else None
    if keys is None and args.case in ("armored", "files"):
        raise SystemExit(f"--case {args.case}: files to an X25519 recipient only")
    if args.case in ("pread", "lone"):
        if args.case == "pread":
            result = one_size(CHUNK, args.reps, pread_cases(Keys(args.dir), args.dir))
            rounds = result["pread"]["rounds"]
            floor = [k + r for k, r in zip(rounds["the kernel call alone"], rounds["reading the chunk"])]
            result["pread"]["ratio_of_floor_vs_cryptography"] = statistics.median(
                c / f for c, f in zip(rounds["cryptography"], floor))
            print(f"the floor, the kernel call and the read: {statistics.median(floor):5.2f} us; cryptography / "
                  f"floor {result['pread']['ratio_of_floor_vs_cryptography']:.2f}x (what agefast's pread could "
                  "reach with no Python at all)", flush=True)
        else:
            result = {"sizes": [one_size(int(k) * 1024, args.reps, lone_cases(int(k) * 1024))
                                for k in (args.sizes if args.sizes != "1,4,16,64" else "1,4,16,32,64").split(",")]}
        print(f"load average at the end: {os.getloadavg()}", file=sys.stderr)
        common.save(f"small_{args.case}", {"calls_per_case": CALLS, **result})
        return
    sizes = []
    for k in args.sizes.split(","):
        size = int(k) * 1024
        if args.case == "armored":
            sizes.append(one_size(size, args.reps, armored_cases(size, keys)))
        elif args.case == "files":
            # Each case's outputs go once its calls are timed: kept, 1 MiB files had filled 8 GiB of tmpfs, and
            # every case slowed down as they did (decrypt 1 MiB in memory 2.9 ms where it takes 0.3).
            cases = files_cases(size, keys, args.dir)
            sizes.append(one_size(size, args.reps, cases, lambda: empty(args.dir / "small-outputs")))
            shutil.rmtree(args.dir / "small-outputs")
        else:
            sizes.append(one_size(size, args.reps, x25519_cases(size, keys) if keys else ssh_cases(size)))
    print(f"load average at the end: {os.getloadavg()}", file=sys.stderr)
    name = f"small_{args.case}" if args.case in ("armored", "files") else "small" if keys else "small_ssh"
    common.save(name, {"calls_per_case": CALLS, "recipient": args.recipient, "sizes": sizes})


if __name__ == "__main__":
    main()
