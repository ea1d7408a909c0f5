"""The degraded-keys axis: file keys and X25519 scalars no honest generator
would pick (all 0x00, all 0xFF, ramps, single bits), low-order shares,
awkward passphrases at low work factors, and post-quantum identities from
degraded seeds."""

import itertools

from . import forge, keys
from .judge import oneshot_decrypt, outcome, verdict_problem
from .primitives import b64
from .reference import HEADER, NO_MATCH, OK, Verdict

AXIS = "keys"


def _pairs(profile):
    fks, scalars = list(keys.DEGRADED_FILE_KEYS.items()), list(keys.DEGRADED_SCALARS.items())
    if profile.key_pairs == "cross":
        return itertools.product(fks, scalars)
    return zip(fks, scalars)


def _check(run, stratum, label, data, spec, intent, plain=None, external=True) -> None:
    """Reference (which must land in `intent`), targets, and the adapter."""
    expected = run.check_targets(stratum, AXIS, label, data, [spec], external=external)
    run.check_intent(stratum, AXIS, label, expected, intent, plain)
    a = run.adapter
    if a is None:
        return
    (got, exc) = run.measure(stratum, AXIS, len(data), lambda: oneshot_decrypt(a, data, [a.identity(spec)]))[0]
    run.record(stratum, AXIS, label, verdict_problem(a, expected, got, exc),
               evidence=(data, [spec], expected, outcome(a, got, exc)))


def _x25519(run, stratum, size, rng) -> None:
    scalars = list(keys.DEGRADED_SCALARS.values())
    for n, ((fk_name, fk), (sc_name, scalar)) in enumerate(_pairs(run.profile)):
        spec = keys.KeySpec("x25519", scalar)
        plain = rng.randbytes(size)
        ephemeral = scalars[(n + 1) % len(scalars)]
        f = forge.forge_x25519(plain, spec.public, fk, rng.randbytes(16), ephemeral)
        _check(run, stratum, f"forged file key={fk_name} scalar={sc_name} size={size}", f.data, spec, {OK}, plain)
    if run.adapter is None:
        return
    for sc_name, scalar in keys.DEGRADED_SCALARS.items():
        spec = keys.KeySpec("x25519", scalar)
        plain = rng.randbytes(size)
        data, exc = run.measure(stratum, AXIS, size, lambda: run.adapter.encrypt(plain, [run.adapter.recipient(spec)]))
        if exc is not None:
            run.record(stratum, AXIS, f"encrypt to scalar={sc_name}", f"raised {type(exc).__name__}: {exc}")
            continue
        _check(run, stratum, f"encrypted to scalar={sc_name} size={size}", data, spec, {OK}, plain)


def _low_order(run, stratum, rng) -> None:
    spec = keys.x25519(rng)
    for point in keys.LOW_ORDER_POINTS:
        fk = rng.randbytes(16)
        stanza = b"-> X25519 " + b64(point) + b"\n" + b64(rng.randbytes(32)) + b"\n"
        f = forge.forge(b"low order", fk, rng.randbytes(16), [stanza])
        _check(run, stratum, f"low-order share {point.hex()}", f.data, spec, {HEADER})


def _passphrases(run, stratum, size, rng) -> None:
    """Forged scrypt files, and the adapter's own when there is one."""
    a = run.adapter
    for name in keys.PASSPHRASES:
        spec = keys.passphrase(name, rng.randint(2, 10))
        plain = rng.randbytes(size)
        files = [("forged", forge.forge_scrypt(plain, spec.secret, spec.work_factor, rng).data)]
        # An empty passphrase only forged: age's scrypt recipient refuses it, pyrage's takes it.
        if a is not None and spec.secret:
            data, exc = run.measure(stratum, AXIS, size, lambda: a.encrypt(plain, [a.recipient(spec)]))
            if exc is not None:
                run.record(stratum, AXIS, f"passphrase {name}", f"encrypt raised {type(exc).__name__}: {exc}")
            else:
                files.append(("encrypted", data))
        for how, data in files:
            _check(run, stratum, f"passphrase {name} wf={spec.work_factor} {how} size={size}", data, spec, {OK},
                   plain)
            wrong = keys.KeySpec("passphrase", spec.secret + "x", spec.work_factor)
            _check(run, stratum, f"wrong passphrase for {name} {how}", data, wrong, {NO_MATCH})
    # A work factor above the limit must be refused before any scrypt runs.
    # pyrage has no limit and would run scrypt with 8 GiB, so no target is asked.
    fk = rng.randbytes(16)
    stanza = b"-> scrypt " + b64(rng.randbytes(16)) + b" 23\n" + b64(rng.randbytes(32)) + b"\n"
    f = forge.forge(b"", fk, rng.randbytes(16), [stanza])
    _check(run, stratum, "scrypt work factor 23", f.data, keys.passphrase("empty", 2), {HEADER},
           external=False)
    # The spec's other rules for the stanza, each broken in a file the passphrase would otherwise open: the work
    # factor is digits with no leading zero, and an scrypt stanza is the only one in its header (C2SP's vectors
    # have two scrypt stanzas; here one beside an X25519 stanza, in each order).
    spec = keys.passphrase("non-ascii", 2)
    fk = rng.randbytes(16)
    stanza = forge.scrypt_stanza(fk, spec.secret, 2, rng.randbytes(16))
    zero = stanza.replace(b" 2\n", b" 02\n", 1)
    _check(run, stratum, "scrypt work factor with a leading zero", forge.forge(b"", fk, rng.randbytes(16), [zero]).data,
           spec, {HEADER})
    x25519 = forge.x25519_stanza(fk, keys.x25519(rng).public, rng.randbytes(32))
    for name, stanzas in (("after", [x25519, stanza]), ("before", [stanza, x25519])):
        f = forge.forge(b"scrypt beside", fk, rng.randbytes(16), stanzas)
        _check(run, stratum, f"scrypt stanza {name} an X25519 stanza", f.data, spec, {HEADER})


def _post_quantum(run, stratum, size, rng) -> None:
    """Neither oracle nor reference speaks mlkem768x25519: round trips only."""
    a = run.adapter
    for name, seed in (("zeros", bytes(32)), ("ones", b"\xff" * 32), ("ramp-up", bytes(range(32)))):
        spec = keys.KeySpec("pq", seed)
        plain = rng.randbytes(size)
        result, exc = run.measure(stratum, AXIS, size, lambda: a.decrypt(a.encrypt(plain, [a.recipient(spec)]),
                                                                          [a.identity(spec)]))
        run.record(stratum, AXIS, f"pq seed={name} size={size}", verdict_problem(a, Verdict(OK, plain), result, exc))


def run_axis(run, stratum) -> None:
    rng = run.rng_for(run.seed_for(stratum.name, AXIS))
    # Key handling does not depend on the size past the first chunk, so the
    # heavier key work runs on the stratum's smallest size.
    size = min(stratum.sizes)
    _x25519(run, stratum.name, size, rng)
    _low_order(run, stratum.name, rng)
    if run.adapter is None or "passphrase" in run.adapter.kinds:
        _passphrases(run, stratum.name, size, rng)
    if run.adapter is not None and "pq" in run.adapter.kinds:
        _post_quantum(run, stratum.name, size, rng)
