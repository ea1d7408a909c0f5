"""agefast --warm-up: the engine's compile paid up front."""

import subprocess
import sys


def test_warm_up_reports_the_engine():
    done = subprocess.run([sys.executable, "-m", "agefast", "--warm-up"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("agefast: payload engine ready (") and done.stderr.endswith(" s\n")


def test_small_jobs_do_not_import_numba(tmp_path):
    probe = ("import sys, agefast\n"
             "i = agefast.x25519.Identity.generate()\n"
             "assert agefast.decrypt(agefast.encrypt(bytes(1024), [i.to_public()]), [i]) == bytes(1024)\n"
             "print('numba' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout == "False\n"
