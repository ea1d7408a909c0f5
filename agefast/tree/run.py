"""A tree job in one process and all cores: small files in groups and large files one by one, on every core.

Small files go in groups to worker processes forked from this one, which
hold the parsed keys already (a passphrase was asked once, a plugin started
once); each worker does a group's files one by one and appends their
manifest lines itself (into an fsspec store's manifest, which cannot be
appended to, this process writes them, from the records). Large files go to
the workers too, a task each, through the engine's file to file path on the
worker's core. Where processes cannot be forked (not POSIX, or one worker
asked for), or there is one task, everything runs here, one file at a time,
a large one on every core. A worker ends with the job's process, even a killed one:
the files it was doing then are done again by the next run.
"""

import errno
import os
import itertools
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

from ..io import cpus
from ..io.replace import check_folder
from . import files, manifest
from .files import Job
from .store import Local
from .walk import Found, Passed, Unlisted, below

# A group of small files sent to a worker at once: enough files that the
# cost of sending the group and its results back (~0.1 ms) is a few per cent.
GROUP_FILES = 64
GROUP_BYTES = 8 * 1024 * 1024


class Summary(NamedTuple):
    """What a tree job did: counts, bytes of the files it did, seconds, and one record per file met."""

    done: int
    failed: int
    skipped: int    # done by an earlier run, as the manifest says
    passed: int     # not taken: not an age file, a symbolic link, a special file
    bytes: int
    seconds: float
    records: list[dict[str, Any]]


# The job and manifest a forked worker inherits (set before the fork).
_inherited: tuple[Job, files.Manifest | None] | None = None


def _die_with_parent(parent: int) -> None:
    """A worker's first step: end when the job's process ends, killed included, rather than go on alone."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:      # it ended before the line above
        os._exit(1)


def _do_group(group: list[Found]) -> list[dict[str, Any]]:
    if _inherited is None:
        raise RuntimeError("a tree worker started without its job")
    job, appender = _inherited
    return [files.process(job, found, appender) for found in group]


def _groups(found: list[Found]) -> Iterator[list[Found]]:
    group: list[Found] = []
    size = 0
    for f in found:
        group.append(f)
        size += f.size
        if len(group) == GROUP_FILES or size >= GROUP_BYTES:
            yield group
            group, size = [], 0
    if group:
        yield group


def _in_workers(job: Job, appender: files.Manifest | None, groups: list[list[Found]],
                workers: int) -> Iterator[list[dict[str, Any]]]:
    """The records of each group, as worker processes forked from this one finish it."""
    # Imported here: a run that forks nothing (one worker, a small tree) saves their ~20 ms.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    global _inherited
    _inherited = (job, appender)
    try:
        before = set(multiprocessing.active_children())
        pool = ProcessPoolExecutor(workers, multiprocessing.get_context("fork"), initializer=_die_with_parent,
                                   initargs=(os.getpid(),))
        try:
            futures = [pool.submit(_do_group, g) for g in groups]
        except BaseException:
            # The first submit forks the workers, then starts the pool's thread. Where that thread is refused
            # (ulimit -v or -u) the pool can neither run nor shut down (joining the thread fails), and its
            # workers would wait for work while the interpreter's exit waits for them.
            for child in set(multiprocessing.active_children()) - before:
                child.kill()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        with pool:      # leaving it waits for the tasks under way
            try:
                for future in as_completed(futures):
                    try:
                        yield future.result()
                    except BrokenProcessPool:
                        # A worker killed (the OOM killer, a kill -9): what it had finished is in the manifest.
                        raise OSError("a worker process ended abruptly (killed, or out of memory?): "
                                      "run the same command again to do the files left") from None
            except BaseException:
                # The job failed, or its caller left it (GeneratorExit): no task that has not started starts, so
                # nothing is written once the failure is told.
                for future in futures:
                    future.cancel()
                raise
    finally:
        _inherited = None


def _can_fork() -> bool:
    return hasattr(os, "fork") and hasattr(os, "register_at_fork")


class RootsRefused(ValueError):
    """Where the job writes lies where its files are: the output root inside the source (its outputs would be
    inputs), or the report inside either tree or on a key file of the job; or a root a cluster's workers cannot
    reach (a store in this process' memory)."""


def check_roots(job: Job) -> None:
    """NotADirectoryError for a source that is not a folder, RootsRefused for an output root inside the source."""
    if not job.source.is_folder():
        raise NotADirectoryError(f"source {str(job.source)!r} is not a folder")
    if job.destination is not None and job.source.below(job.destination) is not None:
        raise RootsRefused(f"destination {str(job.destination)!r} is inside the source "
                           f"{str(job.source)!r}: its outputs would be inputs")


def check_report(job: Job, report: str | bytes, kept: frozenset[tuple[int, int]]) -> None:
    """Before the job: RootsRefused for a report path inside the source or the destination, where it could
    replace one of the job's files (an input, an output, the manifest), or that is one of the job's key files
    (`kept`: device and inode), whatever the stores are; the OSError open() would give where no report can be
    written there (no such folder, a folder of that name), which the job's end had met, its failures untold."""
    for store in (job.source, job.destination):
        if isinstance(store, Local) and below(report, store.root) is not None:
            raise RootsRefused(f"the report {os.fsdecode(report)!r} is inside {str(store)!r}, where it could "
                               "replace one of the job's files")
    name = os.fsdecode(report)
    if os.path.isdir(name):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
    check_folder(name)      # as the report's replacing() checks it, but before the job
    try:
        st = os.stat(name)
    except FileNotFoundError:
        return      # a new report, in a folder that is there
    if (st.st_dev, st.st_ino) in kept:
        raise RootsRefused(f"the report {name!r} is a key file of this job")


class _Bar:
    """Files and bytes done, as a tqdm bar on a terminal's stderr; nothing otherwise."""

    def __init__(self, files_total: int, bytes_total: int, shown: bool) -> None:
        self._bar: Any = None
        self._files, self._total = 0, files_total
        if shown and files_total and sys.stderr.isatty():
            from tqdm import tqdm
            self._bar = tqdm(total=bytes_total, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr,
                             leave=False)

    def update(self, records: list[dict[str, Any]]) -> None:
        if self._bar is not None:
            self._files += len(records)
            self._bar.set_postfix_str(f"{self._files}/{self._total} files", refresh=False)
            self._bar.update(sum(r["size"] for r in records))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def run(job: Job, *, force: bool = False, workers: int | None = None, progress: bool = False,
        client: Any = None) -> Summary:
    """Do `job` on every file of its source tree; see agefast.tree for what each operation does."""
    started = time.monotonic()
    check_roots(job)
    # A store in this process' memory is reached from this process alone.
    here_only = [store for store in (job.source, job.destination) if store is not None and store.in_this_process]
    if here_only and client is not None:
        # A usage error (agefast-tree printed it as a traceback).
        raise RootsRefused(f"a cluster's workers cannot reach {here_only[0]}, which is in this process' memory")
    if client is not None:
        from .cluster import refuse_keys_that_stay_here

        refuse_keys_that_stay_here(job)
    writes = job.operation != files.VERIFY
    root = files.output_root(job)
    previous = manifest.load(root.load_manifest()) if writes and not force else {}
    job = job._replace(sealed_for=files.sealed_for(job.recipients, job.armored),
                       source_below=None if job.destination is None else job.destination.below(job.source))
    outputs = root.stats() if previous else None
    records: list[dict[str, Any]] = []
    small: list[Found] = []
    large: list[Found] = []
    skipped = passed = 0
    whole = files.whole_up_to(job)     # files read whole are done in groups, larger ones a task each
    # Outputs into a local DST never go into a folder of a local SRC, wherever a bind mount shows it.
    source_folders: set[tuple[int, int]] | None = None
    if isinstance(job.source, Local) and isinstance(job.destination, Local):
        source_folders = set()
    for item in job.source.walk(source_folders):
        if isinstance(item, Unlisted):
            records.append({"operation": job.operation, "source": os.fsdecode(item.path), "status": "failed",
                            "error": f"could not be listed: {item.error}"})
            continue
        if isinstance(item, Passed) or not files.takes(job, item.path):
            reason = item.reason if isinstance(item, Passed) else "not an age file (F.age)"
            records.append({"operation": job.operation, "source": os.fsdecode(item.path), "status": "passed",
                            "reason": reason})
            passed += 1
            continue
        name, record = files.output_name(job, item.path), previous.get(item.path)
        if name is not None and record is not None and outputs is not None and manifest.is_done(
                record, item, outputs(name), job.destination is None, (job.source.stamp_key, root.stamp_key),
                job.sealed_for):
            # In the report too, which is one line per file met (it had left these out).
            records.append({"operation": job.operation, "source": os.fsdecode(item.path), "size": item.size,
                            "status": "done before"})
            skipped += 1
            continue
        (small if item.size <= whole else large).append(item)
    if source_folders and isinstance(job.destination, Local):
        job = job._replace(destination=job.destination._replace(sources=frozenset(source_folders)))
    if writes:
        root.make()
    appender = root.manifest() if writes else None
    # Workers append to a local manifest themselves; a store's is rewritten by this process alone.
    shared = appender if isinstance(appender, manifest.Appender) else None
    cores = 1 if here_only else workers or cpus.count()
    bar = _Bar(len(small) + len(large), sum(f.size for f in small + large), progress)

    def summary() -> Summary:
        done = [r for r in records if r["status"] == "done"]
        failed = sum(r["status"] == "failed" for r in records)
        return Summary(len(done), failed, skipped, passed, sum(r["size"] for r in done),
                       time.monotonic() - started, records)

    try:
        try:
            groups = list(_groups(small))
            if client is not None:
                from .cluster import on_cluster

                results = on_cluster(client, job, shared is not None, groups, large)
            elif cores > 1 and len(groups) + len(large) > 1 and _can_fork():
                # Large files go to the workers too, first (the longest tasks), each on one core: their writes
                # then go on side by side. On tmpfs, 4 x 256 MiB two at a time on one core each took 0.68 s
                # where one at a time on both cores took 2.34 (2026-12-05, Zen 4; most of it the kernel's
                # page allocation for the writes, which one file's writer does alone).
                tasks = [[found] for found in large] + groups
                results = _in_workers(job, shared, tasks, min(cores, len(tasks)))
            else:
                results = itertools.chain(
                    ([files.process(job, found, shared) for found in group] for group in groups),
                    ([files.process(job, found, shared, threads=workers)] for found in large))
            try:
                for done in results:
                    records += done
                    bar.update(done)
                    if appender is not None and shared is None:
                        appender.append(done)
            finally:
                # A failure here (a store's manifest that cannot be written) ends the workers' tasks before it is
                # told: a generator left open went on writing outputs after the run had failed.
                close = getattr(results, "close", None)
                if close is not None:
                    close()
        finally:
            bar.close()
            if appender is not None:
                appender.close()
    except OSError as e:
        # What was done goes with the error (told_with), for the command's failures, summary and report: an
        # in-place re-key's files done are no longer what the manifest says.
        told_with(e, summary())
        raise
    return summary()


def told_with(error: OSError, summary: Summary) -> None:
    """`error`, which ended a job that had begun (a store's manifest that can no longer be written, a worker
    killed) or kept its report from being written, keeps what the job did as its attribute `summary`."""
    error.summary = summary     # type: ignore[attr-defined]
