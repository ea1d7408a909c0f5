"""`agefast -j batchpass`: passphrases from the environment, as age 1.3's age-plugin-batchpass."""

import os
import resource

import pytest

import agefast
from agefast.format import armor

FAST = {"AGE_PASSPHRASE_WORK_FACTOR": "5"}


@pytest.fixture
def batch_env():
    def env(**variables):
        base = {k: v for k, v in os.environ.items() if not k.startswith("AGE_PASSPHRASE")}
        return {**base, **variables}

    return env


def test_round_trip(batch_env, run_agefast):
    encrypted = run_agefast("-e", "-j", "batchpass", input=b"batch", env=batch_env(AGE_PASSPHRASE="pw", **FAST))
    assert encrypted.returncode == 0, encrypted.stderr
    # A native scrypt file: readable with the passphrase alone.
    assert agefast.decrypt(encrypted.stdout, [agefast.passphrase.Identity("pw")]) == b"batch"
    decrypted = run_agefast("-d", "-j", "batchpass", input=encrypted.stdout, env=batch_env(AGE_PASSPHRASE="pw"))
    assert (decrypted.returncode, decrypted.stdout) == (0, b"batch"), decrypted.stderr


@pytest.mark.parametrize("written, passphrase", [(b"from fd\n\n", "from fd"), (b"caf\xe9\n", b"caf\xe9")],
                         ids=["text", "not-utf8"])     # any bytes, as age takes them
def test_passphrase_from_a_file_descriptor(written, passphrase, batch_env, run_agefast):
    read_end, write_end = os.pipe()
    os.write(write_end, written)
    os.close(write_end)
    try:
        encrypted = run_agefast("-e", "-j", "batchpass", input=b"x", pass_fds=(read_end,),
                                env=batch_env(AGE_PASSPHRASE_FD=str(read_end), **FAST))
    finally:
        os.close(read_end)
    assert encrypted.returncode == 0, encrypted.stderr
    assert agefast.decrypt(encrypted.stdout, [agefast.passphrase.Identity(passphrase)]) == b"x"


@pytest.mark.parametrize("written", [b"", b"\n", b"\r\n"])
@pytest.mark.parametrize("mode", ["-e", "-d"])
def test_an_empty_passphrase_from_a_file_descriptor_is_refused(written, mode, batch_env, run_agefast):
    # As age's scrypt recipient and identity: a secret never written out had encrypted to the empty passphrase.
    sealed = agefast.encrypt(b"x", [agefast.passphrase.Recipient("pw", work_factor=5)])
    read_end, write_end = os.pipe()
    os.write(write_end, written)
    os.close(write_end)
    try:
        done = run_agefast(mode, "-j", "batchpass", input=b"x" if mode == "-e" else sealed, pass_fds=(read_end,),
                           env=batch_env(AGE_PASSPHRASE_FD=str(read_end), **FAST))
    finally:
        os.close(read_end)
    assert (done.returncode, done.stdout) == (1, b"")
    assert b"passphrase can't be empty" in done.stderr


@pytest.mark.parametrize(("variables", "fragment"), [
    ({"AGE_PASSPHRASE": "pw", "AGE_PASSPHRASE_FD": "3"}, b"mutually exclusive"),
    ({}, b"either AGE_PASSPHRASE or AGE_PASSPHRASE_FD must be set"),
    ({"AGE_PASSPHRASE": "pw", "AGE_PASSPHRASE_WORK_FACTOR": "31"}, b"between 1 and 30"),
    ({"AGE_PASSPHRASE": "pw", "AGE_PASSPHRASE_WORK_FACTOR": "9" * 5000}, b"between 1 and 30"),
    # A descriptor that is no number, or none a process can have, had ended in a traceback.
    ({"AGE_PASSPHRASE_FD": "-1"}, b"invalid AGE_PASSPHRASE_FD: '-1' is not a number"),
    ({"AGE_PASSPHRASE_FD": "1_0"}, b"is not a number"),
    ({"AGE_PASSPHRASE_FD": "\u0663"}, b"is not a number"),
    ({"AGE_PASSPHRASE_FD": "4294967296"}, b"fd 4294967296: Bad file descriptor"),
    # more digits than int() takes (the check that -o is not the passphrase's file had parsed it again)
    ({"AGE_PASSPHRASE_FD": "9" * 5000}, b"Bad file descriptor"),
])
def test_encryption_errors(variables, fragment, batch_env, run_agefast, tmp_path):
    out = tmp_path / "out.age"
    done = run_agefast("-e", "-j", "batchpass", "-o", out, input=b"x", env=batch_env(**variables))
    assert done.returncode == 1
    assert fragment in done.stderr.splitlines()[0]
    assert not out.exists()


def test_a_work_factor_may_have_a_plus_sign_as_go_reads_it(batch_env, run_agefast):
    # strconv.Atoi takes "+5": refused as "not a number" before.
    done = run_agefast("-e", "-j", "batchpass", "-a", input=b"x",
                       env=batch_env(AGE_PASSPHRASE="pw", AGE_PASSPHRASE_WORK_FACTOR="+5"))
    assert done.returncode == 0, done.stderr
    stanza = armor.decode_whole(done.stdout).split(b"\n")[1]
    assert stanza.startswith(b"-> scrypt ") and stanza.endswith(b" 5")
    refused = run_agefast("-e", "-j", "batchpass", "-a", input=b"x",
                          env=batch_env(AGE_PASSPHRASE="pw", AGE_PASSPHRASE_WORK_FACTOR="++5"))
    assert refused.returncode == 1 and b"is not a number" in refused.stderr


def test_not_with_other_recipients(batch_env, run_agefast):
    recipient = str(agefast.x25519.Identity.generate().to_public())
    for order in (["-j", "batchpass", "-r", recipient], ["-r", recipient, "-j", "batchpass"]):
        done = run_agefast("-e", *order, "-a", input=b"x", env=batch_env(AGE_PASSPHRASE="pw", **FAST))
        assert done.returncode == 1
        assert b"incompatible recipients" in done.stderr


@pytest.mark.parametrize(("variables", "fragment"), [
    ({"AGE_PASSPHRASE": "wrong"}, b"incorrect passphrase"),
    ({"AGE_PASSPHRASE": "pw", "AGE_PASSPHRASE_MAX_WORK_FACTOR": "3"}, b"work factor"),
])
def test_decryption_errors(variables, fragment, batch_env, run_agefast):
    encrypted = agefast.encrypt(b"x", [agefast.passphrase.Recipient("pw", work_factor=5)])
    done = run_agefast("-d", "-j", "batchpass", input=encrypted, env=batch_env(**variables))
    assert done.returncode == 1
    assert fragment in done.stderr


def test_refuses_files_without_a_passphrase(batch_env, run_agefast):
    identity = agefast.x25519.Identity.generate()
    encrypted = agefast.encrypt(b"x", [identity.to_public()])
    done = run_agefast("-d", "-j", "batchpass", input=encrypted, env=batch_env(AGE_PASSPHRASE="pw"))
    assert done.returncode == 1
    assert b"file is not passphrase-encrypted" in done.stderr


def test_a_scrypt_the_memory_will_not_take_is_one_error_line(batch_env, run_agefast):
    # Work factor 22 needs 4 GiB; under a 1 GiB address space the command had ended in a MemoryError traceback.
    encrypted = agefast.encrypt(b"x", [agefast.passphrase.Recipient("pw", work_factor=5)])
    forged = encrypted.replace(b" 5\n", b" 22\n", 1)

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    done = run_agefast("-d", "-j", "batchpass", input=forged, env=batch_env(AGE_PASSPHRASE="pw"), preexec_fn=limit)
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [
        "agefast: error: not enough memory for scrypt with work factor 22: it needs 4096 MiB"]
