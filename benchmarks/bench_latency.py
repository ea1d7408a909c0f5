"""Small-file latency: the agefast command on a 1 KiB file, start to exit.

Interleaves the agefast console script, the same script through the pyenv
shim that `agefast` resolves to in a shell here (run outside a venv, where
pyenv has agefast installed), Go age, a bare
`python -c pass` (the floor any Python command pays) and "python-crypto": an
interpreter that imports cryptography's ChaCha20-Poly1305, X25519 and HKDF
and makes one X25519 key, the floor of a Python age command on cryptography.
Then checks that the small path never imports numba, both through the API
and through the CLI (`python -X importtime`), and lists the slowest imports
of the CLI.

agefast's modules are byte-compiled first, as installing a wheel does: this
environment sets PYTHONDONTWRITEBYTECODE, and an editable install never gets
its .pyc files written then, so every command would compile agefast from
source (~30 ms of each command's start on the project's VM).

    python benchmarks/bench_latency.py [--reps N] [--dir DIR]
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import common
from common import AGE, AGEFAST

SIZE = 1024

API_PROBE = """
import json, sys
import agefast
ids = agefast.parse_identities(open(sys.argv[1]).read())
rcp = [i.to_public() for i in ids]
data = bytes(range(256)) * 4
assert agefast.decrypt(agefast.encrypt(data, rcp), ids) == data
print(json.dumps({m: m in sys.modules for m in ("numba", "numpy", "llvmlite", "agefast.kernels")}))
"""


def import_profile(argv: list[str]) -> dict:
    """Run argv under -X importtime: the slowest top-level imports, their total, and any numeric module."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, check=True)
    top, names = [], []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        names.append(name.strip())
        # Top-level imports (no indentation) add up to the whole import cost
        # without counting a nested import twice.
        if not name.startswith("  "):
            top.append({"module": name.strip(), "cumulative_s": int(cumulative) / 1e6})
    top.sort(key=lambda r: -r["cumulative_s"])
    return {"top": top[:12], "total_s": sum(r["cumulative_s"] for r in top),
            "numeric_modules_imported": [n for n in names if n.split(".")[0] in ("numba", "numpy", "llvmlite")]}


CRYPTO_FLOOR = """
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
X25519PrivateKey.generate()
"""


def main() -> None:
    args = common.arguments(__doc__, 30)
    common.compile_bytecode()
    plain, sealed, out = (args.dir / n for n in ("small", "small.age", "small.out"))
    digest = common.make_file(plain, SIZE)
    key, recipient = common.make_key(args.dir)
    common.run([AGE, "-r", recipient, "-o", str(sealed), str(plain)])
    p, s, o, k = str(plain), str(sealed), str(out), str(key)
    # `python` here may run through pyenv, which puts the real bin directory
    # first on PATH, so the shim a user's shell finds is looked up directly
    # (where there is one: not from a venv, nor where pyenv has no agefast).
    shim = Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser() / "shims" / "agefast"
    with_shim = sys.prefix == sys.base_prefix and shim.exists()
    cases = {
        ("encrypt", "agefast-cli"): [AGEFAST, "-r", recipient, "-o", o, p],
        ("encrypt", "agefast-shim"): [str(shim), "-r", recipient, "-o", o, p],
        ("encrypt", "age-cli"): [AGE, "-r", recipient, "-o", o, p],
        ("decrypt", "agefast-cli"): [AGEFAST, "-d", "-i", k, "-o", o, s],
        ("decrypt", "agefast-shim"): [str(shim), "-d", "-i", k, "-o", o, s],
        ("decrypt", "age-cli"): [AGE, "-d", "-i", k, "-o", o, s],
    }
    if not with_shim:
        cases = {name: argv for name, argv in cases.items() if name[1] != "agefast-shim"}

    def verify(op, tool):
        if op == "decrypt":
            ok = common.sha256_file(out) == digest
        else:
            ok = subprocess.run([AGE, "-d", "-i", k, o], capture_output=True, check=True).stdout == plain.read_bytes()
        if not ok:
            raise SystemExit(f"{op} with {tool}: the output does not round-trip")

    result = {"size": SIZE, "shim": str(shim) if with_shim else None, "ops": {}}
    for op in ("encrypt", "decrypt"):
        chosen = {tool: (lambda argv=argv: common.run(argv)) for (o_, tool), argv in cases.items() if o_ == op}
        chosen["python-floor"] = lambda: common.run([sys.executable, "-c", "pass"])
        chosen["python-crypto"] = lambda: common.run([sys.executable, "-c", CRYPTO_FLOOR])
        raw = common.interleave(chosen, args.reps, prepare=lambda t: out.unlink(missing_ok=True),
                                verify=lambda t: not t.startswith("python-") and verify(op, t), log=False)
        result["ops"][op] = {"cases": {t: {**common.summarize(c, SIZE), **c} for t, c in raw.items()}}
        print(op, {t: round(common.median_seconds(c), 4) for t, c in raw.items()}, file=sys.stderr)

    probe = subprocess.run([sys.executable, "-c", API_PROBE, k], capture_output=True, text=True, check=True)
    result["api_modules_after_1kib_round_trip"] = json.loads(probe.stdout)
    result["cli_import_profile"] = import_profile(["-m", "agefast", "-r", recipient, "-o", o, p])
    out.unlink(missing_ok=True)
    common.save("latency", result)


if __name__ == "__main__":
    main()
