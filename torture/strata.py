"""The size strata: named plaintext sizes chosen to hit the STREAM edges."""

from dataclasses import dataclass

from .primitives import CHUNK_SIZE


@dataclass(frozen=True)
class Stratum:
    name: str
    sizes: tuple[int, ...]
    streams: int = 1  # > 1: that many streams at once, on threads
    axes: frozenset[str] | None = None  # the axes it is run on, where not all


def _boundary_sizes() -> tuple[int, ...]:
    return tuple(sorted({k * CHUNK_SIZE + d for k in range(4) for d in (-17, -16, -1, 0, 1, 16, 17)
                         if k * CHUNK_SIZE + d >= 0}))


def all_strata(multistream_streams: int) -> list[Stratum]:
    # MultiStream: 4 MiB in total, split over concurrent streams.
    return [
        Stratum("Micro", (64,)),
        Stratum("SubSIMD", (127,)),
        Stratum("Nominal", (CHUNK_SIZE,)),
        Stratum("Edge", (CHUNK_SIZE + 1,)),
        Stratum("Jumbo", (1 << 20,)),
        Stratum("MultiStream", ((4 << 20) // multistream_streams,), streams=multistream_streams),
        Stratum("Boundary", _boundary_sizes()),
        # Past the 256th chunk, where a counter of one byte wraps, and across an implementation's batches of
        # 16, 32 or 256 chunks (none of the others reaches 17): the round trip is enough to see both, and
        # tampering with 17 MiB files in every way would take minutes.
        Stratum("Long", (257 * CHUNK_SIZE + 1,), axes=frozenset({"roundtrip+adversarial-io"})),
    ]
