"""agetorture against other implementations: Go age and pyrage as targets,
command-line decryptors with injected bugs, an encrypting target, what a
target cannot do, reproducers that show the same outcome again, and the exit
status. Each run is a small slice of the quick profile (one stratum, one or
two axes), so the suite stays fast; `python -m torture --quick --target …`
runs the whole profile the same way."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
AGE = "cmd:age -d -i {identity}"
needs_age = pytest.mark.requires_tool("age")


def torture(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]))
    return subprocess.run([sys.executable, "-m", "torture", "--quick", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=timeout)


def party(report: Path, name: str) -> dict:
    matches = [json.loads(p.read_text()) for p in report.glob("*.json")]
    return next(r for r in matches if r["implementation"] == name)


def rerun(report: Path, group: dict) -> str:
    """Run a reproducer's command.sh; returns the target's line of its output."""
    # Run by a relative path with CDPATH exported, where `cd` prints the folder it finds: the script's own
    # folder had then been read twice.
    p = subprocess.run(["sh", os.path.join(group["reproducer"], "command.sh")], capture_output=True, text=True,
                       timeout=120, cwd=report, env=dict(os.environ, CDPATH=str(report)))
    assert p.returncode == 1, p.stdout + p.stderr  # the difference is still there
    lines = p.stdout.splitlines()
    assert lines[0].startswith(f"reference: {group['reference']}") and group["reference_sha256"] in lines[0]
    return lines[1]


def test_bug_wrapper_is_correct_without_a_bug(tmp_path):
    """The wrappers below differ from this one by their bug alone."""
    p = torture("--strata", "Micro", "--axes", "tamper", "--report", str(tmp_path),
                "--target", f"cmd:{sys.executable} {HERE / 'buggy_decrypt.py'} none {{identity}}")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]


@needs_age
def test_go_age_and_pyrage_side_by_side(tmp_path):
    p = torture("--strata", "Micro", "--axes", "tamper,keys", "--report", str(tmp_path),
                "--target", AGE, "--target", "pyrage")
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]  # pyrage's leniencies, Go age's one
    age = party(tmp_path, AGE)
    [group] = age["disagreements"]
    assert ([c["case"] for c in group["cases"]], group["reference"], group["target"]) == (
        ["header with no stanza size=64 rep=0"], "header", "no-match")
    assert age["files"] > 90 and age["failures"] == 1
    assert age["not_run"] == {"passphrase: a command gets no terminal to type it on": 13,
                              "scrypt work factor above 22: a target with no limit would run minutes of scrypt": 1}
    pyrage = party(tmp_path, "pyrage")
    [group] = pyrage["disagreements"]
    assert (group["stratum"], group["axis"], group["reference"], group["target"]) == ("Micro", "tamper", "header", "ok")
    assert sorted(c["case"].split(" size=")[0] for c in group["cases"]) == [
        "64-column body right before the MAC", "no short line after a 64-column body",
        "stanza with no body line before the MAC"]
    assert pyrage["failures"] == 3 and pyrage["agreements"] > 100
    assert rerun(tmp_path, group).startswith("target pyrage: ok;") and group["target_sha256"] in rerun(tmp_path, group)
    page = (tmp_path / "index.html").read_text()
    assert group["reproducer"] in page and group["reference_sha256"][:16] in page and AGE in page


# Each bug and what agetorture must say about it.
BUGS = {
    "exit-zero": ("reference says payload, target says ok", "ok"),
    "drop-last-byte": ("plaintext differs from the reference's (63 bytes, expected 64)", "ok"),
    "release-failed-chunk": ("released 64 bytes that are not a prefix of the 0 bytes the reference verified",
                             "payload"),
    # A panic is no refusal: it had agreed with any failure, as a failure of a kind not named.
    "panic": ("reference says payload, target crashed (exit 2): panic: runtime error", "crashed"),
}


def test_injected_bugs_are_caught_with_reproducers(tmp_path):
    specs = {bug: f"cmd:{sys.executable} {HERE / 'buggy_decrypt.py'} {bug} {{identity}}" for bug in BUGS}
    # A target named by a path relative to where the run started: its reproducer had run it from its own
    # folder, where it failed to start, and "agreed" with the reference's failure.
    relative = f"cmd:{sys.executable} {os.path.relpath(HERE / 'buggy_decrypt.py', ROOT)} exit-zero {{identity}}"
    p = torture("--strata", "Micro", "--axes", "tamper", "--report", str(tmp_path),
                *[a for spec in [*specs.values(), relative] for a in ("--target", spec)])
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    for bug, (symptom, outcome) in [*BUGS.items(), ("relative", BUGS["exit-zero"])]:
        r = party(tmp_path, relative if bug == "relative" else specs[bug])
        assert r["failures"] > 0, bug
        [group] = [g for g in r["disagreements"] if any(c["problem"].startswith(symptom) for c in g["cases"])]
        assert group["target"] == outcome and group["reproducer"], group
        assert all(g["reproducer"] for g in r["disagreements"])
        line = rerun(tmp_path, group)
        assert line.startswith(f"target {r['implementation']}: {outcome}"), line
        assert outcome == "crashed" or group["target_sha256"] in line, line


def test_what_a_target_cannot_do_is_not_run(tmp_path):
    p = torture("--strata", "Micro", "--axes", "tamper,keys", "--report", str(tmp_path),
                "--target", "module:x25519_only_age")
    r = party(tmp_path, "module:x25519_only_age")
    assert r["not_run"]["passphrase: the module has no passphrase.decrypt"] == 13
    armor = [n for reason, n in r["not_run"].items() if reason.startswith("armor: the probe's armored file")]
    # The armored genuine file and five broken armors (no END line, garbage after it, a 65-column line, a short
    # middle line, an empty line: at this size the last line has no unused bit to set).
    assert armor == [6]
    assert not any("armor" in c["case"] or "passphrase" in c["case"] for g in r["disagreements"] for c in g["cases"])
    assert p.returncode == 1  # pyrage underneath: its three leniencies


@needs_age
def test_encrypting_target(tmp_path):
    p = torture("--strata", "Micro,Edge", "--axes", "encrypt", "--report", str(tmp_path),
                "--target-encrypt", "cmd:age -r {recipient}", "--target-encrypt", "pyrage")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    for name in ("cmd:age -r {recipient}", "pyrage"):
        r = party(tmp_path, name)
        assert r["cases"] == 4 and r["failures"] == 0, r  # two sizes: decrypted by the reference, nonces differ


def test_a_broken_encryptor_is_caught(tmp_path):
    header_only = "import sys; sys.stdout.write('age-encryption.org/v1\\n')"
    spec = f"cmd:{sys.executable} -c \"{header_only}\" {{recipient}}"
    p = torture("--strata", "Micro", "--axes", "encrypt", "--report", str(tmp_path), "--target-encrypt", spec)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    [group] = party(tmp_path, spec)["disagreements"]
    assert (group["reference"], group["target"]) == ("ok", "header")
    assert (tmp_path / group["reproducer"] / "case.age").read_bytes() == b"age-encryption.org/v1\n"
    # The reference's reading of the target's file, against the plaintext's hash.
    again = subprocess.run(["sh", str(tmp_path / group["reproducer"] / "command.sh")], capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 1 and again.stdout.startswith("reference: header"), again.stdout + again.stderr
    assert again.stdout.splitlines()[-1] == f"disagreement: the plaintext's sha256 is {group['reference_sha256']}"


def test_a_reproducer_runs_on_a_machine_without_the_runs_paths(tmp_path, monkeypatch):
    # command.sh named the run's interpreter, folder and torture checkout by their absolute paths: sent to the
    # target's maintainer, it exited 2 at the `cd` there, and the interpreter would not have started either.
    from torture import __main__ as cli
    from torture import reproducers, targets
    from torture.runner import REFERENCE

    header_only = "import sys; sys.stdout.write('age-encryption.org/v1\\n')"
    encryptor = targets.parse(f"cmd:{sys.executable} -c \"{header_only}\" {{recipient}}", encrypting=True)
    run, _, _ = cli.run_torture(None, cli.PROFILES["quick"], 1, {"Micro"}, {"encrypt"}, (REFERENCE,),
                                encrypting=(encryptor,))
    gone = tmp_path / "the other machine"
    with monkeypatch.context() as m:
        m.setattr(sys, "executable", str(gone / "bin" / "python"))
        m.setattr(os, "getcwd", lambda: str(gone / "cwd"))
        m.setattr(reproducers, "_ROOT", str(gone / "checkout"))
        [folder] = reproducers.write(run, str(tmp_path / "sent")).values()
    assert str(gone) in (tmp_path / "sent" / folder / "command.sh").read_text()
    # This machine's Python as python3 on the PATH; as $PYTHON, which wins over a run's interpreter that exists
    # on this machine too (a stub that fails, and python3 on the PATH failing too); and as $PYTHON that cannot
    # import torture (-S -E: no site-packages, no PYTHONPATH), which exits 2 as a target that cannot be run, not
    # 1 as a disagreement.
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, body in [("python", f'exec {shlex.quote(sys.executable)} "$@"'), ("broken", "exit 3"),
                       ("bare", f'exec {shlex.quote(sys.executable)} -S -E "$@"')]:
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / name).chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHON", None)
    for python3, recorded, python, status in [("python", None, None, 1), ("broken", "broken", "python", 1),
                                               ("python", None, "bare", 2)]:
        for link, to in [(bin_ / "python3", python3), (gone / "bin" / "python", recorded)]:
            link.unlink(missing_ok=True)
            if to is not None:
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(bin_ / to)
        again = subprocess.run(["./command.sh"], capture_output=True, text=True, timeout=60,
                               cwd=tmp_path / "sent" / folder,
                               env=dict(env, PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}",
                                        **({"PYTHON": str(bin_ / python)} if python else {})))
        if status == 1:
            assert again.returncode == 1 and again.stdout.startswith("reference: header"), again.stdout + again.stderr
        else:
            assert again.returncode == 2 and "cannot import torture" in again.stderr, again.stdout + again.stderr


@pytest.mark.parametrize("args", [
    ("--target", "nonsense"),
    ("--target", "cmd:age -d"),                       # no {identity}
    ("--target", "cmd:no-such-decryptor {identity}"),
    ("--target", "cmd:false {identity}"),             # cannot decrypt the probe's plain file
    ("--target", "module:no_such_module"),
    ("--target", "pyrage", "--target", "pyrage"),
    ("--target-encrypt", "cmd:age -e"),               # no {recipient}
    ("--strata", "Nope"),
])
def test_usage_errors_exit_2(args):
    p = torture(*args, "--strata", "Micro", "--axes", "tamper") if "--strata" not in args else torture(*args)
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]


@pytest.mark.parametrize("missing", ["case.age", "identity.txt"])
def test_a_reproducer_whose_file_is_missing_exits_2(tmp_path, missing):
    # A missing case.age failed with UnboundLocalError (exit 1, read as "still disagree"), not as a usage error.
    from agefast import x25519
    from torture import reproduce

    (tmp_path / "case.age").write_bytes(b"age-encryption.org/v1\n")
    (tmp_path / "identity.txt").write_text(str(x25519.Identity.generate()) + "\n")
    (tmp_path / missing).unlink()
    with pytest.raises(SystemExit) as exited:
        reproduce.main(["--target", "agefast", str(tmp_path / "case.age"), str(tmp_path / "identity.txt")])
    assert exited.value.code == 2


def test_a_target_is_asked_files_past_a_one_byte_chunk_counter(tmp_path):
    # The Long stratum's files (257 chunks) had reached agefast's adapter alone: a decryptor whose counter
    # wrapped at 256 passed every profile.
    spec = f"cmd:{sys.executable} {HERE / 'buggy_decrypt.py'} {{bug}} {{{{identity}}}}"
    p = torture("--strata", "Long", "--axes", "roundtrip+adversarial-io", "--report", str(tmp_path),
                "--target", spec.format(bug="none"), "--target", spec.format(bug="stop-at-256-chunks"))
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    assert party(tmp_path, spec.format(bug="none"))["failures"] == 0
    wrapped = party(tmp_path, spec.format(bug="stop-at-256-chunks"))
    problems = [c["problem"] for g in wrapped["disagreements"] for c in g["cases"]]
    assert wrapped["cases"] == 3 and any(p.startswith("plaintext differs from the reference's") for p in problems)


def test_a_module_that_raises_a_bug_crashed_and_its_reproducer_runs_without_the_run_s_pythonpath(tmp_path):
    # An IndexError had agreed with any failure; command.sh had not carried the run's PYTHONPATH, so the module
    # did not import and the reproducer exited 2.
    p = torture("--strata", "Micro", "--axes", "tamper", "--report", str(tmp_path), "--target", "module:raising_age")
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    r = party(tmp_path, "module:raising_age")
    crashed = [g for g in r["disagreements"] if g["target"] == "crashed"]   # besides pyrage's leniencies
    assert crashed and all("crashed: IndexError" in c["problem"] for g in crashed for c in g["cases"])
    group = crashed[0]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    rerun_ = subprocess.run(["sh", os.path.join(group["reproducer"], "command.sh")], capture_output=True,
                            text=True, timeout=120, env=env, cwd=tmp_path)
    assert rerun_.returncode == 1 and "crashed" in rerun_.stdout, rerun_.stdout + rerun_.stderr


def test_a_run_that_tests_nothing_exits_2():
    # --axes encrypt without an encrypting target judges no file; it printed "0 cases, 0 failures" and passed.
    p = torture("--strata", "Micro", "--axes", "encrypt")
    assert p.returncode == 2 and "nothing was tested" in p.stderr, p.stdout[-2000:] + p.stderr[-2000:]
    # Nor a run whose named target takes none of its axes: the reference's own checks had counted as cases.
    p = torture("--strata", "Micro", "--axes", "keys", "--target-encrypt", "pyrage")
    assert p.returncode == 2 and "nothing was tested of pyrage" in p.stderr, p.stdout[-2000:] + p.stderr[-2000:]


@needs_age
def test_a_target_that_crashes_or_hangs_disagrees(tmp_path, monkeypatch):
    # A decryptor that dies of SIGSEGV on every file it refuses had agreed with the reference's failures.
    from torture import reference, targets

    crash = tmp_path / "crash.sh"
    crash.write_text("#!/bin/sh\nage \"$@\" || kill -SEGV $$\n")
    crash.chmod(0o755)
    p = torture("--strata", "Micro", "--axes", "tamper", "--target", f"cmd:{crash} -d -i {{identity}}")
    assert p.returncode == 1 and "killed by signal 11" in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]
    refused = reference.Verdict(reference.HEADER, b"", "bad header")
    assert targets.disagreement(refused, targets.Outcome(targets.CRASHED, b"", "timed out after 120 s"))


@pytest.mark.parametrize("named", ["by path", "on the PATH"])
def test_a_target_program_another_account_could_change_is_not_run(named, tmp_path, monkeypatch):
    # The oracle "age", found first in a folder anyone may write, had been run (as root) for every file.
    from torture import targets

    folder = tmp_path / "anyone"
    folder.mkdir()
    folder.chmod(0o777)
    program = folder / "age"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    spec = f"{program if named == 'by path' else 'age'} -d -i {{identity}}"
    with pytest.raises(targets.UsageError, match="is not run: .* writable by group or others"):
        targets.CommandTarget(f"cmd:{spec}", spec)


@pytest.mark.parametrize("message", [
    "age: error: invalid header intro: it looks like this file was corrupted by PowerShell redirection",
    "age: error: failed to parse X25519 recipient: illegal base64 data at input byte 40",
])
def test_go_ages_header_messages_name_the_header(message):
    # Taken for a failure of unknown kind, which agrees with any failure: a target saying these about a bad MAC
    # or payload would have passed.
    from torture import reference, targets

    assert targets.classify([targets._AGE_MESSAGES], message) == reference.HEADER


def test_targets_whose_names_differ_only_in_spacing_have_reports_of_their_own():
    from torture import report

    names = ["agefast", "cmd:age -d -i {identity}", "cmd:age  -d  -i  {identity}", "cmd:age -d -i {identity} " * 9]
    slugs = [report.slug(n) for n in names]
    assert len(set(slugs)) == len(names) and slugs[0] == "agefast"
    assert slugs[1].startswith("cmd-age-d-i-identity-") and all(len(s) <= 64 for s in slugs)


def test_the_page_of_a_run_that_tested_nothing_says_so(tmp_path):
    # It had headlined "disagreements found" above "None".
    p = torture("--strata", "Micro", "--axes", "encrypt", "--report", str(tmp_path))
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    page = (tmp_path / "index.html").read_text()
    assert "nothing was tested" in page and "disagreements found" not in page


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_a_run_stopped_by_a_signal_leaves_no_identity_files(signal_name, tmp_path):
    # SIGTERM (a CI timeout) had left the target's folder of identity files; Ctrl-C printed a traceback.
    import signal
    import time

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]), TMPDIR=str(tmp_path))
    target = f"cmd:{sys.executable} {HERE / 'buggy_decrypt.py'} none {{identity}}"
    p = subprocess.Popen([sys.executable, "-m", "torture", "--quick", "--target", target], env=env, cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not any(tmp_path.glob("agetorture-*/key*.txt")) and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(getattr(signal, signal_name))
    _, err = p.communicate(timeout=120)
    assert p.returncode == 128 + getattr(signal, signal_name) and "Traceback" not in err, err[-2000:]
    assert list(tmp_path.glob("agetorture-*")) == []


def test_an_oracle_this_machine_cannot_run_is_left_out(tmp_path, monkeypatch, capsys):
    # Without Go age on the PATH, a run of agefast had ended in a traceback.
    from torture import targets

    monkeypatch.setenv("PATH", str(tmp_path))
    assert targets.oracles(["age-cli"]) == []
    assert "the oracle age-cli is left out: target 'cmd:age -d -i {identity}': program 'age' not found" in (
        capsys.readouterr().err)


def test_identity_files_made_at_once_on_two_threads_are_two_files(monkeypatch):
    # Streams on several threads asked at once: both took key0.txt, and a correct target was blamed.
    import threading
    import time

    from torture import keys, targets

    real = targets.identity_file_text
    monkeypatch.setattr(targets, "identity_file_text", lambda ids: time.sleep(0.05) or real(ids))
    target = targets.CommandTarget("cmd:cat {identity}", "cat {identity}")
    try:
        specs = [[keys.KeySpec("x25519", bytes([i]) * 32)] for i in (1, 2)]
        paths = [None, None]
        threads = [threading.Thread(target=lambda i=i: paths.__setitem__(i, target.keyfile(specs[i]))) for i in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert paths[0] != paths[1]
        for spec, path in zip(specs, paths):
            assert spec[0].age_identity() in open(path).read()
    finally:
        target.close()


def test_a_target_is_read_no_further_than_its_input_and_no_longer_than_the_timeout(monkeypatch):
    # `yes` as a target had been read whole until the timeout: gigabytes held for every file of a batch.
    import time

    from torture import targets

    returncode, out, _, too_much = targets._capped_run(["sh", "-c", "yes"], b"abc", 3)
    assert too_much and out == b"y\ny" and returncode is not None
    monkeypatch.setattr(targets, "PROCESS_TIMEOUT", 0.5)
    returncode, out, err, too_much = targets._capped_run(["sh", "-c", "echo said >&2; sleep 30"], b"", 10)
    assert returncode is None and not too_much and err == b"said\n"
    returncode, out, err, _ = targets._capped_run(["cat"], b"plain", 5)
    assert (returncode, out, err) == (0, b"plain", b"")
    # A daemon of its own session holding the pipes outlives any kill: the run had waited for it, past the
    # timeout. A shell's child of the same session holding stderr goes with the kill, at once.
    start = time.monotonic()
    returncode, out, _, _ = targets._capped_run(["sh", "-c", "setsid sleep 20 & echo hi"], b"", 10)
    assert returncode is None and out == b"hi\n" and time.monotonic() - start < 15
    returncode, out, _, _ = targets._capped_run(["sh", "-c", "sleep 20 >&2 & echo hi"], b"", 10)
    assert (returncode, out) == (0, b"hi\n") and time.monotonic() - start < 15
