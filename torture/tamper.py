"""The tamper matrix: bit flips in every region, truncations, chunk drops,
duplicates, swaps and reorders, trailing bytes, chunks forged with the
real payload key, and header grammar cases (torture/grammar.py). The reference decides each file's outcome and verified
prefix; each case also names the outcomes it intends, and the reference must
land in that set, so a lenient reference cannot hide a lenient implementation.
"""

from . import adversarial_io as aio
from . import forge, grammar, keys
from .armor import armor
from .judge import oneshot_decrypt, outcome, stream_decrypt, verdict_problem
from .primitives import NONCE_SIZE, SEALED_CHUNK_SIZE, loosened
from .reference import ARMOR, HEADER, MAC, NO_MATCH, OK, PAYLOAD

_REGION_INTENT = {"version": {HEADER}, "mac": {HEADER, MAC}, "nonce": {PAYLOAD}}


def _intent(region: str) -> set[str]:
    if region.startswith("stanza"):
        return {HEADER, NO_MATCH}
    return _REGION_INTENT.get(region, {PAYLOAD})


def _flips(f: forge.Forged, rng, per_region: int):
    data = f.data
    for region, (start, end) in f.regions().items():
        # The first and last byte (a line's opening and its newline) and
        # random bytes in between, in that order of preference.
        positions = [start, end - 1] + [rng.randrange(start, end) for _ in range(max(0, per_region - 2))]
        for pos in sorted(set(positions[:per_region])):
            bit = rng.randrange(8)
            m = bytearray(data)
            m[pos] ^= 1 << bit
            yield f"flip {region} byte={pos} bit={bit}", bytes(m), _intent(region)


def _truncations(f: forge.Forged, every_chunk: bool):
    data = f.data
    cuts = {len(f.header.splitlines(keepends=True)[0]), len(f.header) - 10, len(f.header), f.payload_start - 1}
    n = len(f.sealed)
    inside = range(n) if every_chunk else sorted({0, n // 2, n - 1})
    for i in range(n):
        start, end = f.chunk_span(i)
        cuts.add(start)
        if i in inside:
            cuts |= {start + 1, start + 15, start + 16, (start + end) // 2, end - 16, end - 1}
    for cut in sorted(c for c in cuts if 0 < c < len(data)):
        yield f"truncate at {cut}", data[:cut], {HEADER} if cut < f.payload_start else {PAYLOAD}


def _rearrangements(f: forge.Forged):
    prefix = f.header + f.nonce
    s = f.sealed
    n = len(s)
    for i in range(n):
        if n > 1:
            yield f"drop chunk {i}", prefix + b"".join(s[:i] + s[i + 1:]), {PAYLOAD}
        yield f"duplicate chunk {i}", prefix + b"".join(s[:i + 1] + s[i:]), {PAYLOAD}
        if i + 1 < n:
            yield f"swap chunks {i},{i + 1}", prefix + b"".join(s[:i] + [s[i + 1], s[i]] + s[i + 2:]), {PAYLOAD}
    if n > 2:
        yield "reverse chunks", prefix + b"".join(reversed(s)), {PAYLOAD}


def _trailing(f: forge.Forged, rng):
    data = f.data
    for name, extra in (("1 zero byte", b"\0"), ("16 bytes", rng.randbytes(16)), ("copy of the last chunk", f.sealed[-1]),
                        ("a sealed chunk of junk", rng.randbytes(SEALED_CHUNK_SIZE))):
        yield f"append {name}", data + extra, {PAYLOAD}


def _headers(f: forge.Forged, rng):
    """Well-formed headers that must fail for a reason other than parsing."""
    other_key = rng.randbytes(16)
    stanzas = f.header[len(forge.VERSION_LINE):f.header.rindex(b"---")]
    wrong_mac = forge.header([stanzas], other_key)
    yield "MAC made with another file key", wrong_mac + f.data[len(f.header):], {MAC}
    elsewhere = forge.x25519_stanza(f.file_key, keys.x25519(rng).public, rng.randbytes(32))
    yield "stanza for another recipient", forge.header([elsewhere], f.file_key) + f.data[len(f.header):], {NO_MATCH}


def _forgeries(f: forge.Forged):
    """Chunks sealed with the real payload key but the wrong structure."""
    key, c, n = f.key, f.chunks, len(f.chunks)
    prefix = f.header + f.nonce
    yield "genuine", f.data, {OK}
    all_middle = [forge.seal_chunk(key, i, p, False) for i, p in enumerate(c)]
    yield "missing final flag", prefix + b"".join(all_middle), {PAYLOAD}
    if c[0]:
        empty_final = forge.seal_chunk(key, n, b"", True)
        yield "empty final chunk after the data", prefix + b"".join(all_middle) + empty_final, {PAYLOAD}
    if n > 1:
        early = [forge.seal_chunk(key, 0, c[0], True)] + f.sealed[1:]
        yield "final flag on chunk 0", prefix + b"".join(early), {PAYLOAD}
        yield "final flag on every chunk", prefix + b"".join(
            forge.seal_chunk(key, i, p, True) for i, p in enumerate(c)), {PAYLOAD}


def _armor(f: forge.Forged):
    """Breaks of the ASCII armor itself, around torture's own armoring of `f`."""
    data = armor(f.data)
    lines = data.split(b"\n")
    yield "armored genuine", data, {OK}
    yield "armor without END line", b"\n".join(lines[:-2]) + b"\n", {ARMOR}
    yield "armor with garbage after END", data + b"junk\n", {ARMOR}
    if len(lines) > 4:
        yield "armor with a 65-column line", b"\n".join(lines[:1] + [lines[1] + lines[2][:1], lines[2][1:]] + lines[3:]), {ARMOR}
        # The C2SP armor vectors: a full line cut in two (armor_short_line), an empty line (armor_empty_line_*).
        yield "armor with a short line in the middle", b"\n".join(lines[:1] + [lines[1][:32], lines[1][32:]] + lines[2:]), {
            ARMOR}
    yield "armor with an empty line after BEGIN", b"\n".join(lines[:1] + [b""] + lines[1:]), {ARMOR}
    # The last body line's last character, an unused bit set where it has one (armor_not_canonical).
    last = len(lines) - 3
    body = lines[last].rstrip(b"=")
    if (len(body) * 6) % 8:
        loose = loosened(body) + lines[last][len(body):]
        yield "armor with non-canonical base64 (an unused bit set)", b"\n".join(
            lines[:last] + [loose] + lines[last + 1:]), {ARMOR}


def run_axis(run, stratum) -> None:
    prof = run.profile
    for size in stratum.sizes:
        for rep in range(prof.repeats):
            seed = run.seed_for(stratum.name, "tamper", size, rep)
            rng = run.rng_for(seed)
            key = keys.x25519(rng)
            plain = rng.randbytes(size)
            f = forge.forge_x25519(plain, key.public, rng.randbytes(16), rng.randbytes(NONCE_SIZE), rng.randbytes(32))
            cases = [*_forgeries(f), *_headers(f, rng), *_flips(f, rng, prof.flips_per_region),
                     *_truncations(f, prof.every_chunk), *_rearrangements(f), *_trailing(f, rng)]
            if size <= 2 * SEALED_CHUNK_SIZE:
                cases += _armor(f)
            if size == stratum.sizes[0] and rep == 0:
                # The header grammar does not depend on the payload: once per stratum.
                cases += grammar.cases(f, rng)
            for i, (name, data, intent) in enumerate(cases):
                _judge_file(run, stratum.name, f"{name} size={size} rep={rep}", data, key, intent, seed + i)


def _judge_file(run, stratum: str, label: str, data: bytes, key, intent: set[str], seed: int) -> None:
    expected = run.check_targets(stratum, "tamper", label, data, [key])
    run.check_intent(stratum, "tamper", label, expected, intent)
    a = run.adapter
    if a is None:
        return
    ids = [a.identity(key)]
    (got, exc) = run.measure(stratum, "tamper", len(data), lambda: oneshot_decrypt(a, data, ids))[0]
    run.record(stratum, "tamper", f"{label} [decrypt]", verdict_problem(a, expected, got, exc),
               evidence=(data, [key], expected, outcome(a, got, exc)))
    # Small caller reads: an implementation that hands out plaintext before
    # the chunk's tag verified gets caught releasing it.
    (got, exc) = run.measure(stratum, "tamper", len(data), lambda: stream_decrypt(
        a, data, ids, aio.seeded(seed), lambda p, w: 1 + seed % 4000))[0]
    run.record(stratum, "tamper", f"{label} [decryptor]", verdict_problem(a, expected, got, exc, got),
               evidence=(data, [key], expected, outcome(a, got, exc, got)))
