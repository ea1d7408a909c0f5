"""Running cases: timing, sampled allocation measurement, oracle checks, and
per-(stratum, axis) statistics."""

import random
import threading
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field

from . import oracles, reference

# One operation in this many runs under tracemalloc (which slows it several
# times, so those runs are left out of the latency figures), besides the
# first of each axis.
ALLOC_SAMPLE_EVERY = 16
# Oracle checks wait in a queue so the age CLI gets them in batches.
ORACLE_BATCH = 64
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


class Run:
    def __init__(self, adapter, profile: Profile, seed: int, use_oracles=("reference", "pyrage", "age-cli")):
        self.adapter = adapter
        self.profile = profile
        self.seed = seed
        self.stats: dict[tuple[str, str], AxisStats] = {}
        self.use_oracles = use_oracles
        self._age = oracles.AgeCli() if "age-cli" in use_oracles else None
        self._pending = []
        self.oracle_files: Counter = Counter()  # files each oracle judged
        self._ops = 0
        self._lock = threading.Lock()

    def _axis(self, stratum: str, axis: str) -> AxisStats:
        return self.stats.setdefault((stratum, axis), AxisStats())

    def record(self, stratum: str, axis: str, name: str, problem: str | None) -> None:
        """Count one case; `problem` None means it passed."""
        with self._lock:
            st = self._axis(stratum, axis)
            st.cases += 1
            if problem is not None:
                st.failures += 1
                if len(st.examples) < MAX_EXAMPLES:
                    st.examples.append({"case": name, "problem": problem})

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

    def check_oracles(self, stratum: str, axis: str, name: str, data: bytes, identities,
                      expected: reference.Verdict | None = None, external: bool = True) -> reference.Verdict:
        """Decrypt `data` with every oracle; disagreement with the reference is a failure.

        Returns the reference's verdict (computed unless given). The age CLI
        part is queued and run in batches. `external` False keeps the file
        from pyrage and the age CLI, for files they would spend minutes on.
        """
        if expected is None:
            expected = reference.open_file(data, identities)
            with self._lock:
                self.oracle_files["reference"] += 1
        if not external:
            return expected
        if "pyrage" in self.use_oracles and oracles.supports("pyrage", identities) \
                and not oracles.diverges("pyrage", name):
            problem = oracles.disagreement(expected, oracles.pyrage_decrypt(data, identities))
            with self._lock:
                self.oracle_files["pyrage"] += 1
            self.record(stratum, axis, f"{name} [pyrage]", problem and f"pyrage: {problem}")
        if self._age is not None and oracles.supports("age-cli", identities):
            with self._lock:
                self._pending.append((stratum, axis, name, data, identities, expected))
                flush = len(self._pending) >= ORACLE_BATCH
            if flush:
                self.flush()
        return expected

    def flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        outcomes = self._age.decrypt_many([(d, ids) for _, _, _, d, ids, _ in batch])
        with self._lock:
            self.oracle_files["age-cli"] += len(batch)
        for (stratum, axis, name, _, _, expected), got in zip(batch, outcomes):
            problem = oracles.disagreement(expected, got)
            self.record(stratum, axis, f"{name} [age-cli]", problem and f"age-cli: {problem}")

    def close(self) -> None:
        self.flush()
        if self._age is not None:
            self._age.close()

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
        return sum(s.cases for s in self.stats.values())

    @property
    def failures(self) -> int:
        return sum(s.failures for s in self.stats.values())
