"""How large the pieces are that a payload is written in: one rule, with its measurements.

The compiled file kernel is built with FILE_WRITE_SIZE (agefast.kernels._abi),
so this module is part of the kernels' cache key; write_all (agefast.io.writes)
cuts every other write by it.
"""

# Each write(2) of a file at a known offset hands it at most FILE_WRITE_SIZE
# bytes, cut at the file's FILE_WRITE_SIZE boundaries. On Linux a write into
# the page cache gets folios as large as the write and its alignment in the
# file allow, and on the project's VM, once the host has taken back memory
# the guest freed, the large ones often come from memory the host must fault
# in again (32 KiB is order 3, the largest order the page allocator keeps
# per-CPU lists of). The command decrypting 1 GiB into a new file wrote
# 128 KiB pieces at 3.2-3.9 GB/s until 0.7-0.9 GiB in, then at 0.3-0.5 GB/s;
# 32 KiB pieces went at a steady 2.2-2.9 GB/s. Over whole commands on 1 GiB,
# interleaved, 32 KiB pieces were the faster in 22 of 24 pairs (median
# 0.59 / 0.53 s decrypting / encrypting, against 2.13 / 1.98 s; Go age, whose
# decryption writes 32 KiB too, 1.35 / 1.09 s); on 256 MiB, before any
# slowdown, they cost 0.02 s (0.186 s against 0.163 s). Pieces that start
# off a boundary get runs of smaller folios, so each ends on one
# (benchmarks/HISTORY.md, "Write size, again" and after). Other destinations
# (pipes, wrappers such as the armor writer, memory) get WRITE_SIZE pieces:
# fewer calls.
WRITE_SIZE = 128 << 10
FILE_WRITE_SIZE = 32 << 10
