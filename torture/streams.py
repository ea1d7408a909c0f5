"""The round-trip and adversarial-I/O axes: the implementation encrypts and
decrypts every stratum size through each of its entry points, over hostile
readers and writers, and every file it writes goes to the decrypting targets."""

from concurrent.futures import ThreadPoolExecutor

from . import adversarial_io as aio
from . import forge, keys
from .judge import io_decrypt, oneshot_decrypt, stream_decrypt, verdict_problem
from .primitives import CHUNK_SIZE, NONCE_SIZE
from .reference import OK, PAYLOAD, Verdict

# One-byte patterns cost a Python call per byte; past one chunk and a bit they
# would dominate the run without finding anything the other patterns miss.
ONE_BYTE_LIMIT = CHUNK_SIZE + 17
# One-byte writes also copy per call, so they stop sooner.
ONE_BYTE_WRITE_LIMIT = 4096


def _write_in_fragments(writer, plain: bytes, pattern) -> None:
    pos = calls = 0
    while pos < len(plain):
        calls += 1
        if calls % 5 == 0:
            writer.write(b"")
            continue
        n = min(pattern(pos, len(plain) - pos), len(plain) - pos)
        writer.write(aio.unaligned(plain[pos:pos + n]))
        pos += n
    writer.close()


def _encryptions(run, plain: bytes, recipients, seed: int):
    """(mode, callable making a file) for each way the implementation encrypts."""
    a = run.adapter
    small = len(plain) <= ONE_BYTE_WRITE_LIMIT

    def via_encryptor():
        sink = aio.ShortWriter(aio.one_byte if small else aio.seeded(seed))
        _write_in_fragments(a.encryptor(sink, recipients), plain, aio.one_byte if small else aio.seeded(seed + 1))
        return bytes(sink.data)

    def via_io():
        sink = aio.ShortWriter(aio.half)
        a.encrypt_io(aio.FragmentReader(plain, aio.seeded(seed)), sink, recipients)
        return bytes(sink.data)

    modes = [("encrypt", lambda: a.encrypt(plain, recipients)), ("encryptor", via_encryptor),
             ("encrypt_io", via_io)]
    if a.armor:
        modes.append(("encrypt-armored", lambda: a.encrypt(plain, recipients, True)))
    return modes


def _decrypt_patterns(data: bytes, size: int, seeds):
    small = size <= ONE_BYTE_LIMIT
    sources = [("half", aio.half)] + [(f"seeded-{s}", aio.seeded(s)) for s in seeds]
    sources += [(f"boundary{d:+d}", aio.around_boundaries(data, d)) for d in (-1, 0, 1)]
    if small:
        sources.append(("one-byte", aio.one_byte))
    callers = [("seeded", aio.seeded(seeds[0] + 7)), ("half", aio.half),
               ("chunk-1", lambda p, w: CHUNK_SIZE - 1), ("chunk+1", lambda p, w: CHUNK_SIZE + 1)]
    if small:
        callers.append(("one-byte", aio.one_byte))
    for i, (sname, source) in enumerate(sources):
        cname, caller = callers[i % len(callers)]
        yield f"src={sname} caller={cname}", source, caller, i % 2 == 0, i % 3 == 2


def _nonblocking(run, data, plain, identities) -> str | None:
    """A source that returns None every few reads: BlockingIOError must
    surface (never an early EOF); retrying either finishes correctly or fails
    with a typed error, and only verified plaintext is ever released."""
    src = aio.FragmentRawReader(data, aio.seeded(len(data)), none_every=4)
    try:
        reader = run.adapter.decryptor(src, identities)
    except BlockingIOError:
        return None
    except Exception as e:  # anything but BlockingIOError here is wrong: the file is valid
        return f"header read over a non-blocking source raised {type(e).__name__}: {e}"
    out = bytearray()
    blocked = 0
    while blocked < 10_000:
        try:
            piece = reader.read(CHUNK_SIZE)
        except BlockingIOError:
            blocked += 1
            continue
        except Exception as e:  # a typed error after a lost read is acceptable, untyped is not
            if run.adapter.classify(e) is None:
                return f"untyped error after a non-blocking read: {type(e).__name__}: {e}"
            break
        if not piece:
            if bytes(out) != plain:
                return f"ended early: {len(out)} of {len(plain)} bytes, no error"
            break
        out += piece
    if not plain.startswith(bytes(out)):
        return "released plaintext that is not a prefix of the original"
    return None


def _one_stream(run, stratum: str, size: int, seed: int) -> None:
    a = run.adapter
    key = keys.x25519(run.rng_for(seed))
    ids, recipients = [a.identity(key)], [a.recipient(key)]
    plain = run.rng_for(seed + 1).randbytes(size)
    expected = Verdict(OK, plain)
    files = {}
    for mode, make in _encryptions(run, plain, recipients, seed):
        label = f"{mode} size={size} seed={seed}"
        data, exc = run.measure(stratum, "roundtrip", size, make)
        if exc is not None:
            run.record(stratum, "roundtrip", label, f"encryption raised {type(exc).__name__}: {exc}")
            continue
        files[mode] = data
        ref = run.check_targets(stratum, "roundtrip", label, data, [key])
        run.record(stratum, "roundtrip", f"{label} [reference]", _reference_problem(ref, expected))
        result, exc = run.measure(stratum, "roundtrip", size, lambda: a.decrypt(data, ids))
        run.record(stratum, "roundtrip", label, verdict_problem(a, expected, result, exc))
    if "encrypt" not in files:
        return
    data = files["encrypt"]
    if "encryptor" in files:
        # Two files from the same inputs must not share a payload nonce.
        start = aio.payload_start(data)
        same = data[start - NONCE_SIZE:start] == files["encryptor"][start - NONCE_SIZE:start]
        run.record(stratum, "roundtrip", f"nonce-unique size={size}", "payload nonce repeated" if same else None)
    for name, source, caller, readinto, read_only in _decrypt_patterns(data, size, run.fragment_seeds(seed)):
        label = f"decryptor {name} readinto={readinto} read_only={read_only} size={size}"
        (got, exc), _ = run.measure(stratum, "adversarial-io", size, lambda: stream_decrypt(
            a, data, ids, source, caller, readinto, read_only))
        run.record(stratum, "adversarial-io", label, verdict_problem(a, expected, got, exc, got))
        label = f"decrypt_io {name} size={size}"
        (got, exc), _ = run.measure(stratum, "adversarial-io", size, lambda: io_decrypt(
            a, data, ids, source, aio.half if size > ONE_BYTE_LIMIT else aio.one_byte))
        run.record(stratum, "adversarial-io", label, verdict_problem(a, expected, got, exc, got))
    run.record(stratum, "adversarial-io", f"non-blocking source size={size}",
               _nonblocking(run, data, plain, ids))
    run.record(stratum, "adversarial-io", f"non-blocking sink size={size}",
               _nonblocking_sink(run, plain, recipients, ids))


def _nonblocking_sink(run, plain, recipients, ids) -> str | None:
    """A sink that returns None from write(): a BlockingIOError must surface,
    or, if the implementation copes, the file must still be correct."""
    sink = aio.ShortWriter(aio.half, none_every=3)
    try:
        _write_in_fragments(run.adapter.encryptor(sink, recipients), plain, aio.seeded(len(plain)))
    except BlockingIOError:
        return None
    except Exception as e:  # only BlockingIOError says plainly what happened
        return f"non-blocking sink raised {type(e).__name__}: {e}"
    result, exc = oneshot_decrypt(run.adapter, bytes(sink.data), ids)
    return verdict_problem(run.adapter, Verdict(OK, plain), result, exc)


def _reference_problem(got: Verdict, expected: Verdict) -> str | None:
    if got.kind != expected.kind or got.plaintext != expected.plaintext:
        return f"reference says {got.kind} ({got.detail}) for a file the implementation wrote"
    return None


# A chunk past the 256th, where a counter of one byte wraps: its tag is made under the nonce of counter 256.
_PAST_A_BYTE = 256


def _long_files(run, stratum) -> None:
    """What named targets (no adapter to stream through) are asked of a file past 256 chunks: the whole file,
    the chunk past a one-byte counter flipped, and the file cut after it. The Long stratum's files had reached
    the adapter alone: a target that wraps its counter passed every profile."""
    for size in stratum.sizes:
        if size <= _PAST_A_BYTE * CHUNK_SIZE:
            continue
        seed = run.seed_for(stratum.name, "long", size)
        rng = run.rng_for(seed)
        key = keys.x25519(rng)
        plain = rng.randbytes(size)
        f = forge.forge_x25519(plain, key.public, rng.randbytes(16), rng.randbytes(NONCE_SIZE), rng.randbytes(32))
        start, end = f.chunk_span(_PAST_A_BYTE)
        flipped = bytearray(f.data)
        flipped[(start + end) // 2] ^= 1
        for name, data, intent, original in (
                ("whole", f.data, {OK}, plain), ("chunk 256 flipped", bytes(flipped), {PAYLOAD}, None),
                ("cut after chunk 256", f.data[:end], {PAYLOAD}, None)):
            label = f"{name} size={size}"
            expected = run.check_targets(stratum.name, "roundtrip", label, data, [key])
            run.check_intent(stratum.name, "roundtrip", label, expected, intent, original)


def run_axis(run, stratum) -> None:
    if run.adapter is None:
        _long_files(run, stratum)
        return
    seeds = [(size, rep) for size in stratum.sizes for rep in range(run.profile.repeats)]
    if stratum.streams == 1:
        for size, rep in seeds:
            _one_stream(run, stratum.name, size, run.seed_for(stratum.name, size, rep))
        return
    with ThreadPoolExecutor(stratum.streams) as pool:
        jobs = [pool.submit(_one_stream, run, stratum.name, size, run.seed_for(stratum.name, size, rep, s))
                for size, rep in seeds for s in range(stratum.streams)]
        for job in jobs:
            job.result()
