"""Reproducer folders: for each group of near-duplicate disagreements, the
first case's age file, its identity and a short command showing the
difference (`python -m torture.reproduce`, which asks the reference and the
target again)."""

import os
import pathlib
import shlex
import sys

from . import report
from .targets import identity_file_text

# Where `python -m torture.reproduce` can import torture from.
_ROOT = str(pathlib.Path(__file__).resolve().parents[1])


def _spec(party) -> str:
    """The --target spelling that asks this party again."""
    return party.target.spec if party.target is not None else party.name


# The files of a reproducer folder, which its command names by their place ($D).
_HERE = frozenset({"case.age", "identity.txt", "passphrase.txt"})


def command(party, d, key_arg: str) -> str:
    # For a file an encrypting target wrote, the plaintext's hash is the expectation.
    target = ["--expect-sha256", d.reference_sha256] if d.axis == "encrypt" else ["--target", _spec(party)]
    argv = ["-m", "torture.reproduce", *target, "case.age", *key_arg.split()]
    words = [f'"$D/{a}"' if a in _HERE else shlex.quote(a) for a in argv]
    # The target is asked from where the run asked it, with the run's PYTHONPATH and more: a target named by a
    # relative path, or importable only through PYTHONPATH, had failed to run, and "agreed" with every failure.
    # On another machine (the folder sent to the target's maintainer) the run's interpreter, folder and checkout
    # had been missing, and the command did not start: there it takes $PYTHON or python3 from the PATH, the
    # folder it is started in and torture as installed. $PYTHON, where set, is the interpreter everywhere: a
    # path the run's had may exist elsewhere without torture. Where torture cannot be imported the command
    # exits 2, as where the target cannot be run, not 1 (still disagreeing).
    return (f'D="$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)" || exit 2\n'
            f'P=${{PYTHON:-}}; [ -n "$P" ] || P={shlex.quote(sys.executable)}\n'
            '[ -x "$P" ] || P="${PYTHON:-python3}"\n'
            f'C={shlex.quote(os.getcwd())}; if [ -d "$C" ]; then cd -- "$C" || exit 2; fi\n'
            f'R={shlex.quote(_ROOT)}; if [ -d "$R" ]; then export PYTHONPATH="$R${{PYTHONPATH:+:$PYTHONPATH}}"; fi\n'
            + _run_pythonpath() +
            '"$P" -c "import torture.reproduce" 2>/dev/null || '
            '{ echo "command.sh: $P cannot import torture: install agefast, or put its checkout on PYTHONPATH" >&2; '
            'exit 2; }\n'
            '"$P" ' + " ".join(words))


def _run_pythonpath() -> str:
    """The line that puts the run's PYTHONPATH first (a module: target importable only through it had not
    imported), where the run had one: entries missing on another machine are passed over by Python."""
    run = os.environ.get("PYTHONPATH", "")
    return f'export PYTHONPATH={shlex.quote(run)}"${{PYTHONPATH:+:$PYTHONPATH}}"\n' if run else ""


def _readme(party, d, group, key_arg: str) -> str:
    lines = [f"target:    {party.name}",
             f"group:     {d.stratum} / {d.axis}: reference {d.reference}, target {d.outcome} ({len(group)} cases)",
             f"reference: {d.reference}{f' ({d.reference_detail})' if d.reference_detail else ''}; "
             f"{d.verified} bytes verified, "
             f"sha256 {d.reference_sha256}",
             f"target:    {d.outcome}; {d.released} bytes released, sha256 {d.sha256}",
             f"message:   {d.message}", "", "Run ./command.sh to ask both again.",
             # Its folder is sent to the target's maintainer, whose machine has none of this one's paths.
             "$PYTHON, where set, is its interpreter. Where this machine's Python, the run's folder or its",
             "torture checkout is missing, command.sh takes python3 from the PATH, runs from the folder it is",
             "started in and needs torture importable (installed with agefast, or on PYTHONPATH): else it exits 2."]
    if party.target is not None and getattr(party.target, "argv", None) and d.axis != "encrypt":
        raw = " ".join(shlex.quote(a) for a in party.target.argv_for(key_arg.split()[-1]))
        lines.append(f"The target alone: {raw} < case.age | sha256sum")
    if d.axis == "encrypt":
        lines.append("case.age was written by the target; command.sh shows the reference's reading of it.")
    lines += ["", "Cases in this group (this file is the first):"] + [f"  {x.case}: {x.problem}" for x in group]
    return "\n".join(lines) + "\n"


def write(run, directory: str) -> dict:
    """Write every reproducer under directory/reproducers; returns
    {(party, group key): path relative to `directory`}."""
    out = {}
    for party in run.parties.values():
        n = 0
        for key, group in party.groups.items():
            d = group[0]
            if d.data is None:
                continue
            n += 1
            rel = os.path.join("reproducers", report.slug(party.name),
                               f"{n:02d}-{report.slug('-'.join([d.stratum, d.axis, d.reference, 'vs', d.outcome]))}")
            path = os.path.join(directory, rel)
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, "case.age"), "wb") as f:
                f.write(d.data)
            if d.identities[0].kind == "passphrase":
                key_arg = "--passphrase-file passphrase.txt"
                with open(os.path.join(path, "passphrase.txt"), "w", encoding="utf-8", newline="") as f:
                    f.write(d.identities[0].secret)
            else:
                key_arg = "identity.txt"
                with open(os.path.join(path, "identity.txt"), "w") as f:
                    f.write(identity_file_text(d.identities))
            with open(os.path.join(path, "command.sh"), "w") as f:
                f.write("#!/bin/sh\n" + command(party, d, key_arg) + "\n")
            os.chmod(os.path.join(path, "command.sh"), 0o755)
            with open(os.path.join(path, "README.txt"), "w") as f:
                f.write(_readme(party, d, group, key_arg))
            out[(party.name, key)] = rel
    return out
