"""Targets: the implementations whose answers are compared with the reference.

A target decrypts a file given KeySpecs and answers with an Outcome: success
with its plaintext, or a failure kind and whatever plaintext it released
before failing. Three kinds exist:

- `pyrage` or `module:NAME`: a Python module with pyrage's API (`decrypt`,
  `x25519.Identity.from_str`, `passphrase.decrypt`, optionally `encrypt`);
- `cmd:PROGRAM ARGS…`: a command-line decryptor; `{identity}` in ARGS is the
  path of an identity file in age-keygen format, the ciphertext comes on
  stdin, the plaintext goes to stdout, and exit status 0 means success (an
  encrypting command takes `{recipient}` and the plaintext on stdin instead);
- the agefast adapter (torture/adapter.py), which is driven through its whole
  API by the axes themselves rather than through this module.

What a target cannot do is found by a probe (or declared) before the run and
counted as "not run", never as agreement.
"""

import contextlib
import datetime
import importlib
import os
import random
import re
import shlex
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from agefast.io import trust

from . import bech32, forge, keys, reference
from .armor import armor
from .primitives import NONCE_SIZE
from .reference import ARMOR, HEADER, MAC, NO_MATCH, OK, PAYLOAD

# A process per file costs ~5 ms for Go age; a few at once keep both cores
# busy while files are written and read.
WORKERS = 4
PROCESS_TIMEOUT = 120
FAILED = "failed"  # a failure whose kind the target's message does not name
CRASHED = "crashed"  # killed by a signal, or no answer in PROCESS_TIMEOUT: never a right answer
_TYPED_NAMES = [  # exception class names in a message or MRO, most specific first
    (re.compile(r"HeaderMACError"), MAC), (re.compile(r"NoIdentityMatchError"), NO_MATCH),
    (re.compile(r"PayloadError"), PAYLOAD), (re.compile(r"ArmorError"), ARMOR), (re.compile(r"HeaderError"), HEADER),
]
_AGE_MESSAGES = [
    (re.compile(r"bad header MAC"), MAC),
    (re.compile(r"no identity matched"), NO_MATCH),
    (re.compile(r"armor", re.I), ARMOR),
    (re.compile(r"failed to read header|failed to read nonce|invalid X25519|low order|scrypt|invalid header intro"
                r"|failed to parse \S+ recipient"), HEADER),
    (re.compile(r"payload chunk|trailing data|last chunk is empty|unexpected EOF"), PAYLOAD),
]
_RAGE_MESSAGES = [
    (re.compile(r"Header MAC is invalid"), MAC),
    (re.compile(r"No matching keys"), NO_MATCH),
    (re.compile(r"armor", re.I), ARMOR),
    (re.compile(r"Header is invalid|Unknown age format"), HEADER),
    (re.compile(r"^decryption error$"), PAYLOAD),
]
# What a program that crashed, rather than refused a file, says: a Go panic (exit 2), a Rust panic (exit 101), a
# Python traceback. Such a failure had agreed with any failure, as one of a kind not named.
_CRASH_SIGNS = re.compile(r"^(panic: |goroutine \d+ \[|thread '[^']*' panicked at|Traceback \(most recent call last\):)",
                          re.MULTILINE)
# The exceptions of a Python implementation's own bug, never its refusal of a file (pyrage's Rust panics come up
# as PanicException).
_BUG_EXCEPTIONS = (AssertionError, AttributeError, IndexError, KeyError, NameError, RecursionError, TypeError,
                   ZeroDivisionError)
PASSPHRASE_ON_A_TERMINAL = "passphrase: a command gets no terminal to type it on"
NO_PQ = "post-quantum stanzas: the reference does not implement mlkem768x25519"


class UsageError(Exception):
    """A target that cannot be run at all (bad spec, missing program, failed probe)."""


@dataclass
class Outcome:
    kind: str               # OK, a failure kind, or FAILED when the kind is unknown
    plaintext: bytes = b""  # all of it on OK; on failure what was released first
    message: str = ""


def classify(tables, message: str) -> str:
    for table in tables:
        for pattern, kind in table:
            if pattern.search(message):
                return kind
    return FAILED


def _said(got: Outcome) -> str:
    return f" ({got.message[:160]})" if got.message else ""


def disagreement(expected: reference.Verdict, got: Outcome) -> str | None:
    """Why `got` disagrees with the reference's verdict, or None.

    Agreement: the same success or failure, the same plaintext on success,
    the same kind where the target names one, and on failure nothing released
    beyond the plaintext the reference verified.
    """
    if got.kind == CRASHED:     # whatever the file, a crash or a hang is a bug (a segfault had agreed as a failure)
        return f"reference says {expected.kind}, target {got.message}"
    if (expected.kind == OK) != (got.kind == OK):
        return f"reference says {expected.kind}, target says {got.kind}{_said(got)}"
    if got.kind == OK:
        if got.plaintext != expected.plaintext:
            return (f"plaintext differs from the reference's ({len(got.plaintext)} bytes, "
                    f"expected {len(expected.plaintext)})")
        return None
    if got.kind not in (FAILED, expected.kind):
        return f"reference says {expected.kind} ({expected.detail}), target says {got.kind}{_said(got)}"
    if not expected.plaintext.startswith(got.plaintext):
        return (f"released {len(got.plaintext)} bytes that are not a prefix of the "
                f"{len(expected.plaintext)} bytes the reference verified")
    return None


def identity_file_text(identities) -> str:
    """age-keygen's format: two comment lines and the secret key, per identity."""
    created = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    out = []
    for spec in identities:
        out += [f"# created: {created}", f"# public key: {recipient_string(spec)}", spec.age_identity()]
    return "\n".join(out) + "\n"


def recipient_string(spec) -> str:
    return bech32.encode("age", spec.public)


class Target:
    """What every target shares: its name, its capabilities and its probe."""

    batched = False     # True: decrypt_many runs files in parallel processes
    kinds = frozenset({"x25519"})
    armor = True
    encrypts = False
    # Case-name prefixes this target departs from the spec on by design; only
    # oracles (cross-checks of the reference) declare any.
    known_divergences: tuple = ()

    def __init__(self, spec: str):
        self.spec = spec
        self.name = spec
        self.declared: list[str] = []  # what it cannot do, said before the run

    def cannot(self, identities, data: bytes, case: str) -> str | None:
        """Why this file is not asked of this target, or None."""
        kinds = {s.kind for s in identities}
        if "passphrase" in kinds and "passphrase" not in self.kinds:
            return next((d for d in self.declared if d.startswith("passphrase")), "passphrase: not supported")
        if not kinds <= self.kinds:
            return f"{'/'.join(sorted(kinds - self.kinds))} identities: not supported"
        if data.startswith(b"-----BEGIN") and not self.armor:
            return next(d for d in self.declared if d.startswith("armor"))
        if case.startswith(self.known_divergences):
            return "known divergence from the spec, declared"
        return None

    def probe(self) -> None:
        """Decrypt a plain X25519 file (or refuse to run), then find what else works."""
        rng = random.Random(0)
        key = keys.x25519(rng)
        plain = b"agetorture probe\n"
        f = forge.forge_x25519(plain, key.public, rng.randbytes(16), rng.randbytes(NONCE_SIZE), rng.randbytes(32))
        # Only whether each file decrypts at all: wrong plaintext is a finding
        # of the run, not a reason to skip anything.
        got = self.decrypt_many([(f.data, [key])])[0]
        if got.kind != OK:
            raise UsageError(f"target {self.name!r} cannot decrypt a plain X25519 file: {got.kind} "
                             f"{got.message[:300]!r}")
        got = self.decrypt_many([(armor(f.data), [key])])[0]
        if got.kind != OK:
            self.armor = False
            self.declared.append(f"armor: the probe's armored file was refused ({got.message[:120]})")
        if "passphrase" in self.kinds:
            spec = keys.passphrase("non-ascii", 2)
            p = forge.forge_scrypt(plain, spec.secret, spec.work_factor, rng)
            got = self.decrypt_many([(p.data, [spec])])[0]
            if got.kind != OK:
                self.kinds = self.kinds - {"passphrase"}
                self.declared.append(f"passphrase: the probe's scrypt file was refused ({got.message[:120]})")
        self.declared.append(NO_PQ)

    def decrypt_many(self, jobs) -> list[Outcome]:
        return [self.decrypt(data, ids) for data, ids in jobs]

    def close(self) -> None:
        pass


class PythonTarget(Target):
    """A Python module with pyrage's API, called in this process."""

    kinds = frozenset({"x25519", "passphrase"})

    def __init__(self, spec: str, module_name: str):
        super().__init__(spec)
        try:
            self.module = importlib.import_module(module_name)
        except ImportError as e:
            raise UsageError(f"target {spec!r}: cannot import {module_name}: {e}") from None
        self.module_name = module_name
        if not hasattr(self.module, "decrypt") or not hasattr(getattr(self.module, "x25519", None), "Identity"):
            raise UsageError(f"target {spec!r}: {module_name} has no decrypt and x25519.Identity (pyrage's API)")
        if not hasattr(getattr(self.module, "passphrase", None), "decrypt"):
            self.kinds = frozenset({"x25519"})
            self.declared.append("passphrase: the module has no passphrase.decrypt")
        self.encrypts = hasattr(self.module, "encrypt") and hasattr(self.module.x25519, "Recipient")

    def decrypt(self, data: bytes, identities) -> Outcome:
        m = self.module
        try:
            if identities[0].kind == "passphrase":
                plain = m.passphrase.decrypt(data, identities[0].secret)
            else:
                plain = m.decrypt(data, [m.x25519.Identity.from_str(s.age_identity()) for s in identities])
        except Exception as e:  # the target's answer: its exception says what failed, judged by the caller
            if isinstance(e, _BUG_EXCEPTIONS) or type(e).__name__ == "PanicException":
                return Outcome(CRASHED, message=f"crashed: {type(e).__name__}: {str(e)[:200]}")
            kind = classify([_TYPED_NAMES], " ".join(c.__name__ for c in type(e).__mro__))
            if kind == FAILED:
                kind = classify([_RAGE_MESSAGES], str(e))
            return Outcome(kind, message=f"{type(e).__name__}: {e}")
        return Outcome(OK, bytes(plain))

    def encrypt(self, plain: bytes, recipients) -> bytes:
        m = self.module
        return bytes(m.encrypt(plain, [m.x25519.Recipient.from_str(recipient_string(s)) for s in recipients]))


class CommandTarget(Target):
    """A command-line program, one process per file, several at once."""

    batched = True
    kinds = frozenset({"x25519"})

    def __init__(self, spec: str, template: str, placeholder: str = "{identity}"):
        super().__init__(spec)
        try:
            self.argv = shlex.split(template)
        except ValueError as e:
            raise UsageError(f"target {spec!r}: {e}") from None
        if not self.argv:
            raise UsageError(f"target {spec!r}: no program given")
        if not any(placeholder in a for a in self.argv):
            raise UsageError(f"target {spec!r}: the arguments must contain {placeholder}")
        # A name is looked up on the PATH; a path the user wrote is taken as written.
        program = os.path.abspath(self.argv[0]) if os.sep in self.argv[0] else shutil.which(self.argv[0])
        if program is None or not os.access(program, os.X_OK):
            raise UsageError(f"target {spec!r}: program {self.argv[0]!r} not found")
        # Nothing another account could have put or changed there is run (agefast's own rule for plugins).
        why = trust.program_refusal(program)
        if why is not None:
            raise UsageError(f"target {spec!r}: program {self.argv[0]!r} is not run: {why}")
        self.placeholder = placeholder
        self.encrypts = placeholder == "{recipient}"
        self.declared.append(PASSPHRASE_ON_A_TERMINAL)
        self._dir = tempfile.mkdtemp(prefix="agetorture-")
        self._keyfiles: dict[tuple, str] = {}
        self._keyfiles_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(WORKERS)

    def argv_for(self, value: str) -> list[str]:
        return [a.replace(self.placeholder, value) for a in self.argv]

    def keyfile(self, identities) -> str:
        key = tuple(s.secret for s in identities)
        # Streams on several threads ask at once: two had taken one name for different keys, and a correct
        # target was then blamed for "no identity matched".
        with self._keyfiles_lock:
            if key not in self._keyfiles:
                path = os.path.join(self._dir, f"key{len(self._keyfiles)}.txt")
                with open(path, "w") as f:
                    f.write(identity_file_text(identities))
                self._keyfiles[key] = path
            return self._keyfiles[key]

    def _run(self, data: bytes, keyfile: str) -> Outcome:
        # No plaintext is longer than its ciphertext: a target that writes more is wrong, and is not read
        # further (a target looping on its output had held gigabytes, for every file of a batch).
        returncode, out, err, too_much = _capped_run(self.argv_for(keyfile), data, len(data))
        message = err.decode(errors="replace").strip()
        if returncode is None:
            return Outcome(CRASHED, out, f"timed out after {PROCESS_TIMEOUT} s")
        if too_much:
            return Outcome(CRASHED, out, f"wrote more than the {len(data)} bytes of its input")
        if returncode < 0:
            return Outcome(CRASHED, out, f"killed by signal {-returncode}: {message[:200]}")
        if 128 < returncode <= 128 + 64:     # a shell's word for a child a signal killed (a wrapper script's)
            return Outcome(CRASHED, out, f"exit {returncode}, a shell's for signal {returncode - 128}: {message[:200]}")
        if returncode == 0:
            return Outcome(OK, out, message)
        if _CRASH_SIGNS.search(message):
            return Outcome(CRASHED, out, f"crashed (exit {returncode}): {message[:200]}")
        return Outcome(classify([_TYPED_NAMES, _AGE_MESSAGES, _RAGE_MESSAGES], message), out,
                       f"exit {returncode}: {message}")

    def decrypt_many(self, jobs) -> list[Outcome]:
        """`jobs` are (data, identities) pairs; outcomes come back in order."""
        keyfiles = [self.keyfile(ids) for _, ids in jobs]
        return list(self._pool.map(self._run, [d for d, _ in jobs], keyfiles))

    def encrypt_many(self, jobs) -> list[bytes | Exception]:
        """`jobs` are (plaintext, recipient KeySpec) pairs."""
        def one(job):
            plain, spec = job
            # Read no further than any age file of `plain` could be (armored: 4/3 of it, and a header).
            cap = 2 * len(plain) + (1 << 20)
            returncode, out, err, too_much = _capped_run(self.argv_for(recipient_string(spec)), plain, cap)
            if returncode is None:
                return RuntimeError(f"timed out after {PROCESS_TIMEOUT} s")
            if too_much:
                return RuntimeError(f"wrote more than {cap} bytes for {len(plain)} of plaintext")
            if returncode:
                return RuntimeError(f"exit {returncode}: {err.decode(errors='replace').strip()[:200]}")
            return out
        return list(self._pool.map(one, jobs))

    def close(self) -> None:
        self._pool.shutdown()
        shutil.rmtree(self._dir, ignore_errors=True)


_MESSAGE_CAP = 64 << 10    # of a target's stderr: its error message


def _capped_run(argv: list[str], data: bytes, cap: int) -> tuple[int | None, bytes, bytes, bool]:
    """Run `argv` with `data` on stdin: (exit status, or None when it ran past PROCESS_TIMEOUT; its stdout,
    at most `cap` bytes; its stderr, at most _MESSAGE_CAP; whether it wrote more than `cap`, and was killed)."""
    # A session of its own, killed whole: a shell's child holding the pipes would keep the reads waiting.
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True) as p:
        deadline = time.monotonic() + PROCESS_TIMEOUT

        def feed() -> None:
            try:
                p.stdin.write(data)     # type: ignore[union-attr]
                p.stdin.close()         # type: ignore[union-attr]
            except OSError:             # it stopped reading: its answer says why
                pass

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        out, err = bytearray(), bytearray()
        # The pipes are read here with the time limit, never by a read that blocks: a process the target left
        # in a session of its own (a daemon) holds them past any kill, and such a read would wait for it for good.
        with selectors.DefaultSelector() as pipes:
            pipes.register(p.stdout, selectors.EVENT_READ, out)     # type: ignore[arg-type]
            pipes.register(p.stderr, selectors.EVENT_READ, err)     # type: ignore[arg-type]

            def reading(pipe: Any) -> bool:
                return pipe in (key.fileobj for key in pipes.get_map().values())

            def pump(wait: float) -> None:
                for key, _ in pipes.select(max(wait, 0)):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        pipes.unregister(key.fileobj)
                    elif key.data is out:
                        out.extend(chunk)
                    else:
                        err.extend(chunk[:max(0, _MESSAGE_CAP - len(err))])

            # Its answer, to the end of stdout; then its exit (ended, not yet reaped, so that its pid still
            # names its own group, and what it left there, a shell's child holding stderr, goes with it).
            while reading(p.stdout) and len(out) <= cap and time.monotonic() < deadline:
                pump(deadline - time.monotonic())
            too_much = len(out) > cap
            while not too_much and not _exited(p.pid) and time.monotonic() < deadline:
                pump(min(0.05, deadline - time.monotonic()))
            answered = not too_much and not reading(p.stdout) and _exited(p.pid)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            while reading(p.stderr) and time.monotonic() < deadline:
                pump(deadline - time.monotonic())
        p.wait()
        feeder.join(max(deadline - time.monotonic(), 1))
        if feeder.is_alive():
            # Still writing to a process left behind that holds stdin and never reads: the feeder keeps the
            # pipe (a daemon thread), which closing it here under the write would fail.
            p.stdin = None
        timed_out = not answered and not too_much
        return None if timed_out else p.returncode, bytes(out[:cap]), bytes(err), too_much


def _exited(pid: int) -> bool:
    """Whether the child `pid` has ended, without reaping it."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None


def parse(spec: str, encrypting: bool = False) -> Target:
    """A Target from its command-line spelling; raises UsageError."""
    if spec == "pyrage":
        return PythonTarget(spec, "pyrage")
    if spec.startswith("module:") and spec[len("module:"):]:
        return PythonTarget(spec, spec[len("module:"):])
    if spec.startswith("cmd:"):
        return CommandTarget(spec, spec[len("cmd:"):], "{recipient}" if encrypting else "{identity}")
    raise UsageError(f"unknown target {spec!r}: use agefast, pyrage, module:NAME or 'cmd:PROGRAM ARGS…'")


def oracles(names) -> list[Target]:
    """agefast's cross-checks of the reference, with their declared divergences.

    rage (behind pyrage) still reads the stanza format of the age betas, in
    which a body could end with a full 64-column line (or have no body line
    at all) right before the next line; the spec, Go age and agefast require
    a short final line. Go age parses a header with no stanza and finds no
    identity matched; the spec's grammar has one or more. As targets both are
    asked these cases too.
    """
    out = []
    for name in names:
        try:
            t = parse({"pyrage": "pyrage", "age-cli": "cmd:age -d -i {identity}"}[name])
        except UsageError as e:
            # A cross-check this machine cannot run is left out, and said so: the run still judges the target.
            print(f"agetorture: the oracle {name} is left out: {e}", file=sys.stderr)
            continue
        t.name = name
        if name == "pyrage":
            t.known_divergences = ("no short line after a 64-column body", "64-column body right before the MAC",
                                   "stanza with no body line before the MAC")
        if name == "age-cli":
            t.known_divergences = ("header with no stanza",)
        out.append(t)
    return out
