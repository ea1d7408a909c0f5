"""A tree job on a Dask cluster: the same groups of small files, and each large file, as the cluster's tasks.

The job (its roots and parsed keys) is sent to every worker once, with
client.scatter; a task does a group of files as a forked worker would
(agefast.tree.files), appending to a local manifest itself (a store's is
rewritten by the client, from the records). Keys that a worker cannot
receive (an identity that does not pickle, such as a plugin's) fail here,
before any file is done. Local roots must be paths the workers see as the
client does (a LocalCluster's, or a folder every worker mounts); an fsspec
store's URL and storage options travel with the job, and each worker opens
the store itself.
"""

from collections.abc import Iterator
from typing import Any

from ..errors import IdentityError, RecipientError
from . import files
from .files import Job
from .walk import Found


def _task(job: Job, group: list[Found], appends: bool, threads: int | None) -> list[dict[str, Any]]:
    appender = files.output_root(job).manifest() if appends else None
    try:
        return [files.process(job, found, appender, threads) for found in group]
    finally:
        if appender is not None:
            appender.close()


class ClusterError(ConnectionError):
    """The cluster lost the job: its workers died, or the scheduler cancelled its tasks."""


def result(future: Any) -> list[dict[str, Any]]:
    """A task's records; ClusterError where the cluster lost it (told in one line, not distributed's traceback)."""
    from concurrent.futures import CancelledError

    from distributed.scheduler import KilledWorker

    try:
        records: list[dict[str, Any]] = future.result()
    except (KilledWorker, CancelledError) as e:
        raise ClusterError(f"the Dask cluster lost the job: {type(e).__name__}: {e}") from None
    return records


def refuse_keys_that_stay_here(job: Job) -> None:
    """IdentityError or RecipientError for a key that distributed cannot send to the workers (as it pickles:
    where pickle cannot, or the class is a script's, cloudpickle, so a plugin's callbacks may be a lambda): told
    once, before anything is written, not by distributed's serialisation in every task."""
    import logging

    from distributed.protocol.pickle import dumps

    # Its logger tells what it could not pickle, and a key's text is its secret.
    quiet = logging.getLogger("distributed.protocol.pickle")
    was = quiet.disabled
    quiet.disabled = True
    try:
        for keys, kind, error in ((job.identities, "an identity", IdentityError),
                                  (job.recipients, "a recipient", RecipientError)):
            for key in keys:
                try:
                    dumps(key)  # type: ignore[no-untyped-call]  # distributed's is unannotated
                except Exception as e:     # the key's own, never shown: it may hold the secret
                    raise error(f"{kind} of type {type(key).__name__} cannot be sent to the cluster's workers: "
                                f"{type(e).__name__}") from None
    finally:
        quiet.disabled = was


def on_cluster(client: Any, job: Job, appends: bool, groups: list[list[Found]],
               large: list[Found]) -> Iterator[list[dict[str, Any]]]:
    """The records of each group, and of each large file (a task of its own, on all of its worker's cores)."""
    from distributed import as_completed

    # A key of its own each time (hash=False): the same job run again on one client had scattered the same key
    # while the last run's copy was being released, and its tasks failed ("lost dependencies").
    [shared] = client.scatter([job], broadcast=True, hash=False)
    futures = [client.submit(_task, shared, group, appends, 1, pure=False) for group in groups]
    futures += [client.submit(_task, shared, [found], appends, None, pure=False) for found in large]
    try:
        for future in as_completed(futures):  # type: ignore[no-untyped-call]  # distributed's is unannotated
            yield result(future)
    except BaseException:
        # The job failed, or its caller left it: the tasks not yet run are dropped (one under way finishes).
        client.cancel(futures)
        raise
