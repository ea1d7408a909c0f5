"""Running cases: timing, sampled allocation measurement, the targets'
answers against the reference's, and per-party, per-(stratum, axis)
statistics and disagreements.

A party is whoever a case is counted against: the agefast adapter (driven
through its API by the axes), each external target, agefast's cross-check
oracles, and the reference itself (whose verdict must land in each case's
intended outcomes).
"""

import hashlib
import random
import threading
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field

from . import reference, targets

# One operation in this many runs under tracemalloc (which slows it several
# times, so those runs are left out of the latency figures), besides the
# first of each axis.
ALLOC_SAMPLE_EVERY = 16
# Files for command-line targets wait in a queue so they run in batches.
BATCH = 64
MAX_EXAMPLES = 20


@dataclass
class AxisStats:
    cases: int = 0
    failures: int = 0
    bytes: int = 0
    seconds: float = 0.0
    latencies: list = field(default_factory=list)
    alloc_peaks: list = field(default_factory=list)
    examples: list = field(default_factory=list)
    not_run: int = 0


@dataclass
class Profile:
    """How hard to push: the quick profile for CI, the full one for release."""

    name: str
    flips_per_region: int      # bit flips per header/payload region in the tamper matrix
    fragment_seeds: int        # seeded random fragment patterns per file
    repeats: int               # independent files (fresh keys and nonces) per size
    every_chunk: bool          # truncate inside every chunk, not only the first, middle and last
    key_pairs: str             # "paired" (file key i with scalar i) or "cross" (all combinations)
    multistream_streams: int


REFERENCE = "reference"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Disagreement:
    """One case a party answered differently from the reference."""

    stratum: str
    axis: str
    case: str
    problem: str
    reference: str = "?"         # the reference's outcome kind
    reference_detail: str = ""
    reference_sha256: str = ""   # of the plaintext the reference verified
    verified: int = 0            # its length
    outcome: str = "?"           # the party's outcome kind
    message: str = ""
    sha256: str = ""             # of the plaintext the party released
    released: int = 0            # its length
    data: bytes | None = None    # the file and its identities, kept for a group's first case
    identities: list | None = None

    @property
    def group(self) -> tuple:
        """Near-duplicates share a stratum, an axis and an outcome pair."""
        return self.stratum, self.axis, self.reference, self.outcome


@dataclass
class Party:
    name: str
    role: str                      # "target", "oracle" or "reference"
    target: targets.Target | None = None
    stats: dict = field(default_factory=dict)      # (stratum, axis) -> AxisStats
    not_run: Counter = field(default_factory=Counter)  # reason -> cases
    groups: dict = field(default_factory=dict)     # Disagreement.group -> [Disagreement]
    files: int = 0                 # files this party judged
    seconds: float = 0.0           # time spent waiting for its answers

    def axis(self, stratum: str, axis: str) -> AxisStats:
        return self.stats.setdefault((stratum, axis), AxisStats())

    @property
    def cases(self) -> int:
        return sum(s.cases for s in self.stats.values())

    @property
    def failures(self) -> int:
        return sum(s.failures for s in self.stats.values())


class Run:
    def __init__(self, adapter, profile: Profile, seed: int, use_oracles=(REFERENCE, "pyrage", "age-cli"),
                 decrypting=(), encrypting=()):
        """`adapter` (or None) is driven through its API; `decrypting` targets
        are asked every file the axes make, `encrypting` ones make files for
        the reference. The oracles cross-check the reference in an adapter's run."""
        self.adapter = adapter
        self.profile = profile
        self.seed = seed
        self.parties: dict[str, Party] = {REFERENCE: Party(REFERENCE, REFERENCE)}
        if adapter is not None:
            self.parties[adapter.name] = Party(adapter.name, "target")
        oracle_names = [o for o in use_oracles if o != REFERENCE] if adapter is not None else []
        self.use_oracles = [REFERENCE, *oracle_names]
        self.decrypting = [*targets.oracles(oracle_names), *decrypting]
        for t in self.decrypting:
            self.parties[t.name] = Party(t.name, "oracle" if t.name in oracle_names else "target", t)
        self.encrypting = list(encrypting)
        for t in self.encrypting:
            self.parties.setdefault(t.name, Party(t.name, "target", t))
        self._pending: dict[str, list] = {}
        self._ops = 0
        self._lock = threading.Lock()

    @property
    def oracle_files(self) -> Counter:
        """Files each decryptor judged (the reference's included)."""
        return Counter({p.name: p.files for p in self.parties.values() if p.files})

    def _axis(self, stratum: str, axis: str) -> AxisStats:
        return self.parties[self.adapter.name].axis(stratum, axis)

    def record(self, stratum: str, axis: str, name: str, problem: str | None, party: str | None = None,
               evidence=None) -> None:
        """Count one case of `party` (the adapter by default); `problem` None
        means it passed. `evidence` (data, identities, reference Verdict,
        party's Outcome) makes a failure reproducible."""
        with self._lock:
            p = self.parties[party or self.adapter.name]
            st = p.axis(stratum, axis)
            st.cases += 1
            if problem is None:
                return
            st.failures += 1
            if len(st.examples) < MAX_EXAMPLES:
                st.examples.append({"case": name, "problem": problem})
            d = Disagreement(stratum, axis, name, problem)
            if evidence is not None:
                data, identities, expected, got = evidence
                d.reference, d.reference_detail = expected.kind, expected.detail
                d.reference_sha256, d.verified = sha256(expected.plaintext), len(expected.plaintext)
                d.outcome, d.message = got.kind, got.message[:500]
                d.sha256, d.released = sha256(got.plaintext), len(got.plaintext)
            group = p.groups.setdefault(d.group, [])
            if evidence is not None and not group:
                d.data, d.identities = data, list(identities)
            group.append(d)

    def not_run(self, party: str, stratum: str, axis: str, reason: str) -> None:
        with self._lock:
            p = self.parties[party]
            p.not_run[reason] += 1
            p.axis(stratum, axis).not_run += 1

    def measure(self, stratum: str, axis: str, nbytes: int, fn):
        """Run one operation of the implementation under test and time it.

        Returns (result, exception); exceptions are the implementation's
        answer, not torture's, so they are handed back to be judged.
        """
        with self._lock:
            self._ops += 1
            # tracemalloc is process-wide, so only the main thread's operations
            # are sampled (other threads would count into them); every axis
            # gets its first operation sampled, so no row is left without.
            sample = threading.current_thread() is threading.main_thread() and (
                self._ops % ALLOC_SAMPLE_EVERY == 0 or not self._axis(stratum, axis).alloc_peaks)
        if sample:
            tracemalloc.start()
        start = time.perf_counter()
        try:
            result, exc = fn(), None
        except Exception as e:  # judged by the caller
            result, exc = None, e
        elapsed = time.perf_counter() - start
        with self._lock:
            st = self._axis(stratum, axis)
            if sample:
                st.alloc_peaks.append(tracemalloc.get_traced_memory()[1])
                tracemalloc.stop()
            else:
                st.latencies.append(elapsed)
                st.bytes += nbytes
                st.seconds += elapsed
        return result, exc

    def check_intent(self, stratum: str, axis: str, name: str, expected: reference.Verdict, intent,
                     plain: bytes | None = None) -> None:
        """The reference's verdict must be one the case intends (and, given
        `plain`, decrypt to it): a lenient reference cannot hide a lenient target."""
        problem = None if expected.kind in intent else (f"reference says {expected.kind} ({expected.detail}), "
                                                        f"intended {sorted(intent)}")
        if problem is None and plain is not None and expected.plaintext != plain:
            problem = "reference plaintext differs from the original"
        self.record(stratum, axis, name, problem, REFERENCE)

    def reference_verdict(self, data: bytes, identities) -> reference.Verdict:
        with self._lock:
            self.parties[REFERENCE].files += 1
        return reference.open_file(data, identities)

    def check_targets(self, stratum: str, axis: str, name: str, data: bytes, identities,
                      expected: reference.Verdict | None = None, external: bool = True) -> reference.Verdict:
        """Decrypt `data` with every decrypting target; disagreeing with the
        reference is a failure of that target.

        Returns the reference's verdict (computed unless given). Command-line
        targets get files queued and run in batches. `external` False keeps
        the file from every target, for files they would spend minutes on.
        """
        if expected is None:
            expected = self.reference_verdict(data, identities)
        for t in self.decrypting:
            reason = t.cannot(identities, data, name) if external else \
                "scrypt work factor above 22: a target with no limit would run minutes of scrypt"
            if reason is not None:
                self.not_run(t.name, stratum, axis, reason)
            elif t.batched:
                with self._lock:
                    queue = self._pending.setdefault(t.name, [])
                    queue.append((stratum, axis, name, data, identities, expected))
                    flush = len(queue) >= BATCH
                if flush:
                    self.flush(t)
            else:
                start = time.perf_counter()
                got = t.decrypt(data, identities)
                self._judge(t, time.perf_counter() - start, [(stratum, axis, name, data, identities, expected)],
                            [got])
        return expected

    def _judge(self, t, seconds: float, jobs, outcomes) -> None:
        with self._lock:
            p = self.parties[t.name]
            p.files += len(jobs)
            p.seconds += seconds
        for (stratum, axis, name, data, identities, expected), got in zip(jobs, outcomes):
            problem = targets.disagreement(expected, got)
            self.record(stratum, axis, name, problem, t.name, (data, identities, expected, got))

    def flush(self, target=None) -> None:
        for t in [target] if target else [t for t in self.decrypting if t.batched]:
            with self._lock:
                batch = self._pending.pop(t.name, [])
            if batch:
                start = time.perf_counter()
                outcomes = t.decrypt_many([(d, ids) for _, _, _, d, ids, _ in batch])
                self._judge(t, time.perf_counter() - start, batch, outcomes)

    def close(self) -> None:
        self.flush()
        for t in {id(t): t for t in self.decrypting + self.encrypting}.values():
            t.close()

    def seed_for(self, *parts) -> int:
        """A seed for one case, fixed by the run's seed and the case's name."""
        return random.Random(f"{self.seed}-" + "-".join(map(str, parts))).getrandbits(48)

    @staticmethod
    def rng_for(seed: int) -> random.Random:
        return random.Random(seed)

    def fragment_seeds(self, seed: int) -> list[int]:
        return [seed + i for i in range(self.profile.fragment_seeds)]

    @property
    def cases(self) -> int:
        return sum(p.cases for p in self.parties.values())

    @property
    def failures(self) -> int:
        return sum(p.failures for p in self.parties.values())
