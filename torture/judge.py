"""Deciding whether the implementation under test answered a file correctly,
and the ways of asking it (one-shot, streaming reader, decrypt_io)."""

from .adversarial_io import FragmentRawReader, FragmentReader, ShortWriter, read_sizes, unaligned
from .reference import OK, Verdict
from .targets import Outcome


def verdict_problem(adapter, expected: Verdict, plaintext, exc, released: bytes | None = None) -> str | None:
    """What is wrong with the implementation's answer, or None.

    `released` is the plaintext a streaming decryptor handed out before it
    failed: it must be a prefix of what the reference verified.
    """
    if exc is None:
        if expected.kind != OK:
            return f"accepted a file the reference rejects as {expected.kind} ({expected.detail})"
        if plaintext != expected.plaintext:
            return f"wrong plaintext ({len(plaintext)} bytes, expected {len(expected.plaintext)})"
        return None
    kind = adapter.classify(exc)
    if kind is None:
        return f"untyped error {type(exc).__name__}: {exc}"
    if expected.kind == OK:
        return f"rejected a valid file: {kind}: {exc}"
    if kind != expected.kind:
        return f"expected {expected.kind} ({expected.detail}), got {kind}: {exc}"
    if released is not None and not expected.plaintext.startswith(released):
        return (f"released {len(released)} bytes that are not a prefix of the "
                f"{len(expected.plaintext)} verified bytes")
    return None


def outcome(adapter, plaintext, exc, released: bytes = b"") -> Outcome:
    """The adapter's answer as a target's Outcome, for the report."""
    if exc is None:
        return Outcome(OK, plaintext)
    return Outcome(adapter.classify(exc) or f"untyped {type(exc).__name__}", released, f"{type(exc).__name__}: {exc}")


def drain(reader, sizes, use_readinto: bool) -> tuple[bytes, Exception | None]:
    """Read `reader` to the end with the given request sizes.

    Returns what was released and the exception that stopped it. After a
    DecryptError the reader must keep raising the same error.
    """
    out = bytearray()
    for n in sizes:
        try:
            if use_readinto:
                buf = unaligned(bytes(n))
                got = reader.readinto(buf)
                piece = bytes(buf[:got])
            else:
                piece = reader.read(n)
        except Exception as e:  # the implementation's answer, judged by the caller
            try:
                reader.read(1)
            except Exception as again:  # must be the very same error
                if type(again) is not type(e) or str(again) != str(e):
                    return bytes(out), RuntimeError(f"error changed on retry: {e!r} then {again!r}")
                return bytes(out), e
            return bytes(out), RuntimeError(f"read after {e!r} succeeded")
        if n and not piece:
            return bytes(out), None
        if not n and piece:
            return bytes(out), RuntimeError("a zero-length read returned data")
        out += piece
    raise AssertionError("read_sizes is endless")


def stream_decrypt(adapter, data: bytes, identities, pattern, caller_pattern, use_readinto=True,
                   read_only=False):
    """Decrypt through adapter.decryptor over a fragmenting source."""
    src = (FragmentReader if read_only else FragmentRawReader)(data, pattern)
    try:
        reader = adapter.decryptor(src, identities)
    except Exception as e:  # header failures surface at construction
        return b"", e
    return drain(reader, read_sizes(caller_pattern, len(data)), use_readinto)


def io_decrypt(adapter, data: bytes, identities, pattern, write_pattern):
    """Decrypt through adapter.decrypt_io into a short-writing sink."""
    sink = ShortWriter(write_pattern)
    try:
        adapter.decrypt_io(FragmentRawReader(data, pattern), sink, identities)
    except Exception as e:  # judged by the caller
        return bytes(sink.data), e
    return bytes(sink.data), None


def oneshot_decrypt(adapter, data: bytes, identities):
    try:
        return adapter.decrypt(data, identities), None
    except Exception as e:  # judged by the caller
        return b"", e
