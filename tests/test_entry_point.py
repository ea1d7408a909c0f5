"""The agefast console script: it ends the process itself (os._exit), so
everything it printed must still arrive, and its exit status must be main's."""

import signal
import subprocess
import sys
from pathlib import Path

import agefast
from required import unavailable

SCRIPT = Path(sys.executable).with_name("agefast")
IDENTITY = agefast.x25519.Identity.generate()

if not SCRIPT.exists():
    unavailable(f"no agefast console script at {SCRIPT} (pip install -e .)")


def test_output_to_a_pipe_arrives_whole(tmp_path):
    data = bytes(range(256)) * 4096 + b"tail"
    done = subprocess.run([SCRIPT, "-r", str(IDENTITY.to_public()), "-a"], input=data, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(b"-----END AGE ENCRYPTED FILE-----\n")
    key = tmp_path / "key.txt"
    key.write_text(str(IDENTITY) + "\n")
    back = subprocess.run([SCRIPT, "-d", "-i", str(key)], input=done.stdout, capture_output=True)
    assert back.returncode == 0 and back.stdout == data


def test_failure_exit_status_and_message():
    done = subprocess.run([SCRIPT, "-d"], input=b"not an age file", capture_output=True)
    assert done.returncode == 1
    assert done.stderr.startswith(b"agefast: error: ") and done.stderr.endswith(b"\n")


def test_a_command_is_imported_with_sigint_at_its_default_action(tmp_path, monkeypatch):
    # A Ctrl-C while Python imported a command printed KeyboardInterrupt's traceback; at SIGINT's default
    # action it ends the process at once, as it ends age. The handler is back once the command is imported.
    from agefast import __main__ as scripts

    (tmp_path / "probe_command.py").write_text("import signal\nat_import = signal.getsignal(signal.SIGINT)\n"
                                               "def main():\n    return 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = signal.getsignal(signal.SIGINT)
    main = scripts._command("probe_command")
    assert (sys.modules["probe_command"].at_import, main(), signal.getsignal(signal.SIGINT)) == (
        signal.SIG_DFL, 7, before)
    # A SIGINT the process was started ignoring (a shell script's background job) stays ignored, as age leaves
    # it: it had been at its default action while the command was imported.
    del sys.modules["probe_command"]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        scripts._command("probe_command")
        assert (sys.modules["probe_command"].at_import, signal.getsignal(signal.SIGINT)) == (
            signal.SIG_IGN, signal.SIG_IGN)
    finally:
        signal.signal(signal.SIGINT, before)
    # every console script goes through it
    from importlib.metadata import entry_points

    installed = {e.name: e.value for e in entry_points(group="console_scripts") if e.name.startswith("agefast")}
    assert installed == {"agefast": "agefast.__main__:run", **{f"agefast-{name}": f"agefast.__main__:{name}"
                                                             for name in ("keygen", "inspect", "rekey", "tree")}}
