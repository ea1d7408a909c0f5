"""Coverage-guided fuzzing (atheris) of the readers that take untrusted bytes.

Not a test module: pytest does not collect it, and atheris is no test
dependency. To run one target for two minutes:

    pip install atheris
    python tests/fuzz/fuzz_readers.py decrypt -max_total_time=120
    python tests/fuzz/fuzz_readers.py armor -max_total_time=120

Any further arguments go to libFuzzer (-jobs=N, -max_len=N (8192 unless
given), a corpus directory...). Seed files (valid binary, armored and
passphrase files, whitespace around armor) are written to a temporary
corpus directory first. A crash (an input that breaks a rule below) is
saved as crash-* in the current directory; run the same command with that
file instead of the options to replay it.

Targets:

- decrypt: agefast.decrypt over the input, and a streaming decryptor over the
  same bytes through a reader that returns a few bytes at a time, with
  `armored` None, True or False (chosen by the first byte). Each must return
  the plaintext or raise a DecryptError, both the same, and before a failure
  the stream may have released whole chunks only.
- armor: agefast.format.armor.ArmorReader against the line-by-line reference codec
  (tests/armor_naive.py) for read sizes and read steps chosen by the first
  bytes: every read returns the same bytes or raises the same ArmorError.
"""

import io
import os
import sys
import tempfile
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tests/, for armor_naive and streams

# Only agefast is instrumented: coverage of the reference codec would only slow each try.
with atheris.instrument_imports(include=["agefast"], exclude=["agefast.kernels"]):
    import agefast
    from agefast.format import armor
    from agefast.io.source import Source
    from agefast.errors import ArmorError, DecryptError

import armor_naive
from streams import Trickle

# A fixed key, so that a corpus kept from one run still decrypts in the next.
IDENTITY = agefast.x25519.Identity.from_str(
    "AGE-SECRET-KEY-1AH0WXH47GCVZLFV5RYCZAFV5V0DH5EVSGW6VZGPZDQTD4X90H6CQAAAUH5")
# A low work factor keeps each try fast; higher ones are refused before scrypt runs.
PASSPHRASE = agefast.passphrase.Identity("fuzz", max_work_factor=4)
IDENTITIES = [IDENTITY, PASSPHRASE]
MODES = (None, True, False)
SIZES = (7, 47, 48, 100, 4096, 1 << 16)


def _whole(data: bytes, armored: bool | None) -> tuple[bytes | None, type | None]:
    """(plaintext, None) or (None, the DecryptError's class)."""
    try:
        return agefast.decrypt(data, IDENTITIES, armored=armored), None
    except DecryptError as e:
        return None, type(e)


def _streamed(data: bytes, armored: bool | None, step: int) -> tuple[bytes, type | None]:
    """(what a streaming decryptor released, the DecryptError's class or None)."""
    out = bytearray()
    try:
        reader = agefast.decryptor(Trickle(data, step), IDENTITIES, armored=armored)
        while chunk := reader.read(1000):
            out += chunk
    except DecryptError as e:
        return bytes(out), type(e)
    return bytes(out), None


def fuzz_decrypt(raw: bytes) -> None:
    if not raw:
        return
    armored, step, data = MODES[raw[0] % 3], 1 + raw[0] // 3, raw[1:]
    whole, whole_error = _whole(data, armored)
    released, stream_error = _streamed(data, armored, step)
    if stream_error != whole_error or (whole is not None and released != whole):
        raise AssertionError(f"decrypt gave {whole_error or len(whole or b'')}, "
                             f"the stream {stream_error or len(released)}")
    if stream_error is not None and len(released) % (64 << 10):
        raise AssertionError(f"the stream released {len(released)} bytes before failing: not whole chunks")


def _reads(reader_class, text: bytes, step: int, size: int) -> list:
    reader = reader_class(Source(Trickle(text, step)))
    results: list = []
    for _ in range(len(text) + 2):
        buf = bytearray(size)
        try:
            n = reader.readinto(buf)
        except ArmorError as e:
            results.append(("error", str(e)))
            break
        results.append(bytes(buf[:n]))
        if n == 0:
            break
    return results


def fuzz_armor(raw: bytes) -> None:
    if len(raw) < 2:
        return
    step, size, text = 1 + raw[0], SIZES[raw[1] % len(SIZES)], raw[2:]
    ours, reference = _reads(armor.ArmorReader, text, step, size), _reads(armor_naive.ArmorReader, text, step, size)
    if ours != reference:
        raise AssertionError(f"armor reads differ:\n{ours!r}\n{reference!r}")


def decrypt_seeds() -> list[bytes]:
    data = bytes(range(256)) * 4 + b"tail"
    binary = agefast.encrypt(data, [IDENTITY.to_public()])
    armored = agefast.encrypt(data, [IDENTITY.to_public()], armored=True)
    scrypt = agefast.encrypt(b"hello", [agefast.passphrase.Recipient("fuzz", work_factor=2)])
    texts = [binary, armored, scrypt, agefast.encrypt(b"", [IDENTITY.to_public()], armored=True),
             b"\n" * 1000 + armored + b"\r\n" * 500, armored.replace(b"\n", b"\r\n"), b" " * 1100]
    return [bytes([mode]) + text for mode in (0, 1, 2, 10) for text in texts]


def armor_seeds() -> list[bytes]:
    texts = []
    for size in (0, 1, 2, 47, 48, 49, 100, 200):
        out = io.BytesIO()
        writer = armor.ArmorWriter(out)
        writer.write(bytes(range(size)))
        writer.close()
        texts += [out.getvalue(), out.getvalue().replace(b"\n", b"\r\n"), b" \n" * 500 + out.getvalue() + b"\n" * 1000]
    return [bytes([step, size]) + text for step, size in ((0, 0), (6, 3)) for text in texts]


def main() -> None:
    targets = {"decrypt": (fuzz_decrypt, decrypt_seeds), "armor": (fuzz_armor, armor_seeds)}
    if len(sys.argv) < 2 or sys.argv[1] not in targets:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(targets)}}} [libFuzzer options] [corpus or crash files]")
    name = sys.argv[1]
    target, seeds = targets[name]
    args = [sys.argv[0], *sys.argv[2:]]
    if not any(a.startswith("-max_len=") for a in args):
        args.append("-max_len=8192")   # room for the seeds and for more than 1024 bytes of whitespace
    if not any(os.path.isfile(a) for a in args[1:]):   # fuzzing, not replaying a crash
        corpus = tempfile.mkdtemp(prefix=f"agefast-fuzz-{name}-")
        for i, seed in enumerate(seeds()):
            Path(corpus, f"seed-{i}").write_bytes(seed)
        args.append(corpus)
    atheris.Setup(args, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
