"""A tree job on a Dask cluster: the same groups of small files, and each large file, as the cluster's tasks.

The job (its roots and parsed keys) is sent to every worker once, with
client.scatter; a task does a group of files as a forked worker would
(agefast.tree.files), appending to the manifest itself. Keys that a worker
cannot receive (an identity that does not pickle, such as a plugin's) fail
here, before any file is done. The roots must be paths the workers see as
the client does: a LocalCluster's, or a folder every worker mounts.
"""

from collections.abc import Iterator
from typing import Any

from . import files, manifest
from .files import Job
from .walk import Found


def _task(job: Job, group: list[Found], manifest_path: bytes | None, threads: int | None) -> list[dict[str, Any]]:
    appender = None if manifest_path is None else manifest.Appender(manifest_path)
    try:
        return [files.process(job, found, appender, threads) for found in group]
    finally:
        if appender is not None:
            appender.close()


def on_cluster(client: Any, job: Job, manifest_path: bytes | None, groups: list[list[Found]],
               large: list[Found]) -> Iterator[list[dict[str, Any]]]:
    """The records of each group, and of each large file (a task of its own, on all of its worker's cores)."""
    from distributed import as_completed

    [shared] = client.scatter([job], broadcast=True)
    futures = [client.submit(_task, shared, group, manifest_path, 1, pure=False) for group in groups]
    futures += [client.submit(_task, shared, [found], manifest_path, None, pure=False) for found in large]
    for future in as_completed(futures):  # type: ignore[no-untyped-call]  # distributed's is unannotated
        yield future.result()
