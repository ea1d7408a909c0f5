"""The independent decryptors every generated file is checked against.

The reference gives typed outcomes. The Go `age` CLI and pyrage only give
messages; the ones that name an outcome unambiguously are mapped to it, the
rest count as "failed, kind unknown". Agreement means the same success or
failure, the same plaintext on success, and the same kind where it is known.
"""

import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from . import reference
from .reference import ARMOR, HEADER, MAC, NO_MATCH, OK, PAYLOAD

AGE = "/usr/bin/age"
# age spawns a process per file (~5 ms); a few at once keep both cores busy
# while files are written and read.
AGE_WORKERS = 4

_AGE_MESSAGES = [
    (re.compile(r"bad header MAC"), MAC),
    (re.compile(r"no identity matched"), NO_MATCH),
    (re.compile(r"armor", re.I), ARMOR),
    (re.compile(r"failed to read header|failed to read nonce|invalid X25519|low order|scrypt"), HEADER),
    (re.compile(r"payload chunk|trailing data|last chunk is empty|unexpected EOF"), PAYLOAD),
]
_PYRAGE_MESSAGES = [
    (re.compile(r"Header MAC is invalid"), MAC),
    (re.compile(r"No matching keys"), NO_MATCH),
    (re.compile(r"armor", re.I), ARMOR),
    (re.compile(r"Header is invalid|Unknown age format"), HEADER),
    (re.compile(r"^decryption error$"), PAYLOAD),
]


@dataclass
class Outcome:
    kind: str          # OK, one of the failure kinds, or "failed" when unknown
    plaintext: bytes = b""
    message: str = ""


def _classify(table, message: str) -> str:
    return next((kind for pattern, kind in table if pattern.search(message)), "failed")


def disagreement(expected: reference.Verdict, got: Outcome) -> str | None:
    """Why `got` disagrees with the reference's verdict, or None."""
    if (expected.kind == OK) != (got.kind == OK):
        return f"reference says {expected.kind}, oracle says {got.kind} ({got.message[:120]})"
    if got.kind == OK and got.plaintext != expected.plaintext:
        return "plaintext differs from the reference's"
    if got.kind not in (OK, "failed", expected.kind):
        return f"reference says {expected.kind}, oracle says {got.kind} ({got.message[:120]})"
    return None


# Cases where an oracle departs from the age spec on purpose, by case-name
# prefix. rage (behind pyrage) still reads the stanza format of the age betas,
# in which a body could end with a full 64-column line right before the next
# stanza; the spec and Go age require a shorter final line, as agefast does.
KNOWN_DIVERGENCES = {
    "pyrage": ("no short line after a 64-column body",),
}


def diverges(name: str, case: str) -> bool:
    """Whether oracle `name` is known to depart from the spec on this case."""
    return case.startswith(KNOWN_DIVERGENCES.get(name, ()))


def supports(name: str, identities) -> bool:
    """The age CLI takes X25519 key files only; pyrage also passphrases; pq neither."""
    kinds = {spec.kind for spec in identities}
    if name == "age-cli":
        return kinds == {"x25519"}
    return kinds in ({"x25519"}, {"passphrase"})


def pyrage_decrypt(data: bytes, identities) -> Outcome:
    import pyrage
    try:
        if identities[0].kind == "passphrase":
            plain = pyrage.passphrase.decrypt(data, identities[0].secret)
        else:
            plain = pyrage.decrypt(data, [pyrage.x25519.Identity.from_str(s.age_identity()) for s in identities])
    except Exception as e:  # pyrage raises its own DecryptError, or ValueError/TypeError on odd input
        return Outcome(_classify(_PYRAGE_MESSAGES, str(e)), message=str(e))
    return Outcome(OK, plain)


class AgeCli:
    """Runs `age -d -i KEYFILE` on many files at once."""

    def __init__(self):
        self._dir = tempfile.mkdtemp(prefix="agetorture-")
        self._keyfiles: dict[tuple, str] = {}
        self._pool = ThreadPoolExecutor(AGE_WORKERS)

    def _keyfile(self, identities) -> str:
        key = tuple(s.secret for s in identities)
        if key not in self._keyfiles:
            path = os.path.join(self._dir, f"key{len(self._keyfiles)}.txt")
            with open(path, "w") as f:
                f.write("".join(s.age_identity() + "\n" for s in identities))
            self._keyfiles[key] = path
        return self._keyfiles[key]

    def _run(self, data: bytes, keyfile: str) -> Outcome:
        p = subprocess.run([AGE, "-d", "-i", keyfile], input=data, capture_output=True, timeout=120)
        if p.returncode == 0:
            return Outcome(OK, p.stdout)
        message = p.stderr.decode(errors="replace").strip()
        return Outcome(_classify(_AGE_MESSAGES, message), message=message)

    def decrypt_many(self, jobs) -> list[Outcome]:
        """`jobs` are (data, identities) pairs; outcomes come back in order."""
        keyfiles = [self._keyfile(ids) for _, ids in jobs]
        return list(self._pool.map(self._run, [d for d, _ in jobs], keyfiles))

    def close(self) -> None:
        self._pool.shutdown()
        shutil.rmtree(self._dir, ignore_errors=True)
