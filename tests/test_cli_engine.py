"""agefast --warm-up: the engine's compile paid up front."""

import subprocess
import sys

import command_imports


def test_warm_up_reports_the_engine():
    done = subprocess.run([sys.executable, "-m", "agefast", "--warm-up"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("agefast: payload engine ready (") and done.stderr.endswith(" s\n")


def test_warm_up_refused_by_a_setting_says_so_in_one_line(tmp_path):
    # An unknown AGEFAST_KERNEL_FORM had printed a 49-line traceback.
    env = dict(__import__("os").environ, AGEFAST_KERNEL_FORM="bogus", NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "agefast", "--warm-up"], capture_output=True, text=True, env=env)
    assert done.returncode == 0
    assert done.stderr.startswith("agefast: payload engine: cryptography; the kernels cannot be loaded here: ")
    assert len(done.stderr.splitlines()) == 1 and "AGEFAST_KERNEL_FORM" in done.stderr, done.stderr


def test_warm_up_says_when_the_setting_keeps_every_job_on_cryptography():
    # It had said "payload engine ready (avx2)", though no job of the process would run on the kernels.
    env = dict(__import__("os").environ, AGEFAST_ENGINE="cryptography")
    done = subprocess.run([sys.executable, "-m", "agefast", "--warm-up"], capture_output=True, text=True, env=env)
    assert (done.returncode, done.stderr) == (0, "agefast: payload engine: cryptography; AGEFAST_ENGINE asks for it\n")


def test_an_engine_setting_of_no_engine_is_one_line(tmp_path):
    # It had ended every command in a traceback.
    env = dict(__import__("os").environ, AGEFAST_ENGINE="bogus")
    recipient = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
    out = tmp_path / "out.age"
    done = subprocess.run([sys.executable, "-m", "agefast", "-r", recipient, "-o", out], input="x", capture_output=True,
                          text=True, env=env)
    assert done.returncode == 1 and not out.exists()
    assert done.stderr == "agefast: error: AGEFAST_ENGINE must be 'cryptography' or 'numba', not 'bogus'\n"


def test_small_jobs_do_not_import_numba(tmp_path):
    probe = ("import sys, agefast\n"
             "i = agefast.x25519.Identity.generate()\n"
             "assert agefast.decrypt(agefast.encrypt(bytes(1024), [i.to_public()]), [i]) == bytes(1024)\n"
             "print('numba' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout == "False\n"


def test_an_x25519_command_imports_no_other_recipient_type(tmp_path):
    # The other recipient types cost start-up; they load when a key of theirs is met.
    # So does the standard library's OpenSSL binding (_hashlib, about 3 ms):
    # the header's HMAC comes from cryptography. Nor do cryptography's OpenSSL
    # backend (~7 ms, agefast.recipients.x25519._native), tempfile (~5 ms,
    # agefast.io.replace), PyNaCl (~4 ms, agefast.recipients.x25519.SODIUM_AFTER)
    # or, with no armor, pybase64.
    key = tmp_path / "key.txt"
    subprocess.run([sys.executable, "-m", "agefast.cli.keygen", "-o", str(key)], check=True, capture_output=True)
    (tmp_path / "small").write_bytes(b"x" * 1024)
    # Only what the command itself imports counts: a site hook may have loaded
    # some of these before it (this sandbox's certifi hook loads tempfile).
    probe = command_imports.probe(
        "print(sorted(m for m in ('passphrase', 'scrypt', 'plugin', 'pq', 'ssh', 'tag', 'tagpq', 'numba', 'dataclasses', "
        "'_hashlib', 'tempfile', 'cryptography.hazmat.backends.openssl.backend', 'pybase64', 'nacl') "
        "if {m, 'agefast.' + m, 'agefast.recipients.' + m} & set(imported)), file=sys.stderr)")
    sealed, opened = tmp_path / "small.age", tmp_path / "small.out"
    for argv in (["-e", "-i", key, "-o", sealed, tmp_path / "small"], ["-d", "-i", key, "-o", opened, sealed]):
        done = subprocess.run([sys.executable, "-c", probe, *map(str, argv)], capture_output=True, text=True)
        assert done.returncode == 0 and done.stderr == "[]\n", (argv[0], done.stderr)
    assert opened.read_bytes() == b"x" * 1024
    import agefast

    assert agefast.ssh.Recipient and "ssh" in dir(agefast)  # still there on first use
