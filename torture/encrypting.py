"""The encrypt axis: each encrypting target (`--target-encrypt`) encrypts
every stratum size to a fresh X25519 recipient and the reference decrypts
the file; it must give back the plaintext, and two files of the same
plaintext must not share a payload nonce."""

from . import keys
from .adversarial_io import payload_start
from .primitives import NONCE_SIZE
from .reference import OK, Verdict
from .targets import Outcome, disagreement

AXIS = "encrypt"


def _encrypt_all(target, jobs) -> list:
    if target.batched:
        return target.encrypt_many(jobs)
    out = []
    for plain, spec in jobs:
        try:
            out.append(target.encrypt(plain, [spec]))
        except Exception as e:  # the target's answer, judged below
            out.append(e)
    return out


def _nonce(data: bytes) -> bytes | None:
    try:
        start = payload_start(data)
    except ValueError:
        return None
    return data[start - NONCE_SIZE:start]


def run_axis(run, stratum) -> None:
    for t in run.encrypting:
        cases = []
        for size in stratum.sizes:
            for rep in range(run.profile.repeats):
                rng = run.rng_for(run.seed_for(stratum.name, AXIS, size, rep))
                cases.append((f"encrypted by the target size={size} rep={rep}", keys.x25519(rng), rng.randbytes(size)))
        # Each plaintext twice: the two files must differ in their nonces.
        results = _encrypt_all(t, [(plain, key) for _, key, plain in cases for _ in range(2)])
        for i, (label, key, plain) in enumerate(cases):
            first, second = results[2 * i], results[2 * i + 1]
            if isinstance(first, Exception):
                run.record(stratum.name, AXIS, label, f"encryption failed: {first}", t.name)
                continue
            verdict = run.reference_verdict(first, [key])
            got = Outcome(verdict.kind, verdict.plaintext, verdict.detail)
            # The plaintext is the expectation; the reference's reading of the file is the target's answer.
            problem = disagreement(Verdict(OK, plain), got)
            run.record(stratum.name, AXIS, label, problem and f"the reference's reading of the file: {problem}",
                       t.name, (first, [key], Verdict(OK, plain), got))
            if not isinstance(second, Exception):
                same = _nonce(first) is not None and _nonce(first) == _nonce(second)
                run.record(stratum.name, AXIS, f"nonce-unique size={len(plain)}", "payload nonce repeated" if same
                           else None, t.name)
