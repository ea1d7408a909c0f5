"""What a failure leaves in the output: the plaintext of every chunk before
the first that failed, as Go age leaves it, never anything after it and never
a hole; or nothing, where the output is replaced only on success.

The files are just large enough for the file kernel (agefast.payload.file_driver),
whose workers write their batches in any order: 35 MiB, 17 batches through
the kernel (chunks 0-543), the last one (chunks 544-560) through the pipeline.
"""

import errno
import io
import os
import random
import resource
import signal
import subprocess
import sys

import fsspec
import pytest

import agefast
from agefast import kernels
from agefast.payload import rules
from agefast.payload.engine import ENGINE_AFTER
from agefast.payload.rules import CHUNK_SIZE, SEALED_CHUNK_SIZE
from agefast.errors import PayloadError, TruncatedError
from required import need_tools, unavailable

AGEFAST = [sys.executable, "-m", "agefast"]
MiB = 1 << 20
SIZE = ENGINE_AFTER + 3 * MiB + 17
KERNEL_CHUNKS = (rules.sealed_size(SIZE) - 1) // (kernels.FILE_BATCH * SEALED_CHUNK_SIZE) * kernels.FILE_BATCH
BATCH = kernels.FILE_BATCH * CHUNK_SIZE    # the plaintext of one batch of the file kernel
# The first failing chunk: in the first batch, in the second (as in the damaged
# file of issue 25), in the last batch through the kernel, in the pipeline's
# tail, and the first of two in batches of different workers.
DAMAGES = [(5,), (47,), (KERNEL_CHUNKS - 4,), (KERNEL_CHUNKS + 6,), (300, 70)]
OWN = b"o" * 4095   # what a caller's file holds before decrypt_io starts


@pytest.fixture(scope="module", autouse=True)
def warm_cache():
    # The file kernel applies only where the kernels are in the cache (agefast.payload.engine.choose).
    kernels.warm_up()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(folder, identity file, plaintext, sealed file) shared by the module's tests."""
    folder = tmp_path_factory.mktemp("prefix")
    identity = agefast.x25519.Identity.generate()
    (folder / "key.txt").write_text(f"{identity}\n")
    plain = random.Random(25).randbytes(SIZE)
    (folder / "plain").write_bytes(plain)
    agefast.encrypt_file(folder / "plain", folder / "sealed", [identity.to_public()])
    return folder, folder / "key.txt", plain, folder / "sealed"


@pytest.fixture(scope="module")
def damaged(files):
    """damaged(*chunks): a copy of the sealed file with one byte flipped in each of `chunks` (made once)."""
    folder, _, _, sealed = files
    made = {}

    def make(*damage):
        if damage not in made:
            data = bytearray(sealed.read_bytes())
            payload_at = len(data) - rules.sealed_size(SIZE)
            for chunk in damage:
                data[payload_at + chunk * SEALED_CHUNK_SIZE + 100] ^= 0xFF
            path = folder / ("damaged-" + "-".join(map(str, damage)))
            path.write_bytes(data)
            made[damage] = path
        return made[damage]

    return make


def identities(key):
    return agefast.load_identities(key.read_bytes())


def run(args, stdout=subprocess.PIPE, **kwargs):
    return subprocess.run([*AGEFAST, *map(str, args)], stdin=subprocess.DEVNULL, stdout=stdout,
                          stderr=subprocess.PIPE, timeout=120, **kwargs)


@pytest.mark.parametrize("damage", DAMAGES)
def test_decrypt_io_into_a_file_leaves_the_prefix_from_its_offset(tmp_path, files, damaged, damage):
    _, key, plain, _ = files
    with open(damaged(*damage), "rb") as src, open(tmp_path / "out", "wb") as dst:
        dst.write(OWN)
        with pytest.raises(PayloadError, match=f"failed to authenticate payload chunk {min(damage)}$"):
            agefast.decrypt_io(src, dst, identities(key))
        assert dst.tell() == len(OWN) + min(damage) * CHUNK_SIZE
    assert (tmp_path / "out").read_bytes() == OWN + plain[:min(damage) * CHUNK_SIZE]


@pytest.mark.parametrize("damage", DAMAGES)
def test_stdout_to_a_regular_file_leaves_the_prefix(tmp_path, files, damaged, damage):
    _, key, plain, _ = files
    with open(tmp_path / "out", "wb") as out:
        done = run(["-d", "-i", key, damaged(*damage)], stdout=out)
    assert done.returncode == 1
    assert f"failed to authenticate payload chunk {min(damage)}".encode() in done.stderr
    assert (tmp_path / "out").read_bytes() == plain[:min(damage) * CHUNK_SIZE]


@pytest.mark.requires_tool("age")
def test_the_prefix_is_go_ages(tmp_path, files, damaged):
    # The damaged file of issue 25: chunk 47, 3,080,192 bytes before it.
    _, key, plain, _ = files
    with open(tmp_path / "go", "wb") as out:
        assert subprocess.run(["age", "-d", "-i", key, damaged(47)], stdout=out, stderr=subprocess.DEVNULL,
                              timeout=120).returncode == 1
    with open(tmp_path / "agefast", "wb") as out:
        assert run(["-d", "-i", key, damaged(47)], stdout=out).returncode == 1
    with open(damaged(47), "rb") as src, open(tmp_path / "decrypt_io", "wb") as dst:
        with pytest.raises(PayloadError):
            agefast.decrypt_io(src, dst, identities(key))
    go = (tmp_path / "go").read_bytes()
    assert len(go) == 3_080_192 and go == plain[:len(go)]
    assert (tmp_path / "agefast").read_bytes() == go and (tmp_path / "decrypt_io").read_bytes() == go


# A copy cut short after 540 chunks (16 batches through the kernel, the rest
# through the pipeline): at that chunk boundary, which proves the cut, and
# 1000 bytes into chunk 540, which can't be told from a damaged final chunk.
CUT_CHUNKS = 540
CUTS = {"at a chunk boundary": (0, TruncatedError, f"the file is truncated: it ends after chunk {CUT_CHUNKS - 1}, "
                                "without a final chunk", "unexpected EOF"),
        "inside a chunk": (1000, PayloadError, f"failed to authenticate payload chunk {CUT_CHUNKS}, the last in the "
                           "file: it is damaged, or the file is truncated", "failed to decrypt and authenticate payload")}


@pytest.fixture(scope="module")
def cut(files):
    """cut(name): a copy of the sealed file cut as CUTS[name] says (made once)."""
    folder, _, _, sealed = files
    made = {}

    def make(name):
        if name not in made:
            data = sealed.read_bytes()
            payload_at = len(data) - rules.sealed_size(SIZE)
            made[name] = folder / f"cut-{CUTS[name][0]}"
            made[name].write_bytes(data[:payload_at + CUT_CHUNKS * SEALED_CHUNK_SIZE + CUTS[name][0]])
        return made[name]

    return make


@pytest.mark.parametrize("name", CUTS)
def test_a_cut_file_says_so_and_leaves_the_prefix(tmp_path, files, cut, name):
    _, key, plain, _ = files
    _, error, message, _ = CUTS[name]
    assert os.path.getsize(cut(name)) >= ENGINE_AFTER  # the file kernel's route
    with open(cut(name), "rb") as src, open(tmp_path / "out", "wb") as dst:
        with pytest.raises(PayloadError) as failed:
            agefast.decrypt_io(src, dst, identities(key))
    assert (type(failed.value), str(failed.value)) == (error, message)
    assert (tmp_path / "out").read_bytes() == plain[:CUT_CHUNKS * CHUNK_SIZE]


@pytest.mark.requires_tool("age")
@pytest.mark.parametrize("name", CUTS)
def test_a_cut_file_leaves_go_ages_prefix(tmp_path, files, cut, name):
    _, key, plain, _ = files
    _, _, message, go_message = CUTS[name]
    with open(tmp_path / "go", "wb") as out:
        go = subprocess.run(["age", "-d", "-i", key, cut(name)], stdout=out, stderr=subprocess.PIPE, timeout=120)
    assert go.returncode == 1 and go_message in go.stderr.decode()
    with open(tmp_path / "agefast", "wb") as out:
        done = run(["-d", "-i", key, cut(name)], stdout=out)
    assert done.stderr.decode().splitlines() == [f"agefast: error: invalid payload: {message}"]
    assert (tmp_path / "agefast").read_bytes() == (tmp_path / "go").read_bytes() == plain[:CUT_CHUNKS * CHUNK_SIZE]


@pytest.mark.parametrize("damage", [DAMAGES[0], DAMAGES[2]])
def test_outputs_replaced_on_success_only_are_left_as_they_were(tmp_path, files, damaged, damage):
    _, key, _, _ = files
    (tmp_path / "kept").write_bytes(b"before")
    done = run(["-d", "-i", key, "-o", tmp_path / "kept", damaged(*damage)])
    assert done.returncode == 1 and (tmp_path / "kept").read_bytes() == b"before"
    with pytest.raises(PayloadError):
        agefast.decrypt_file(damaged(*damage), tmp_path / "new", identities(key))
    assert sorted(os.listdir(tmp_path)) == ["kept"]


def test_the_fsspec_layer_releases_nothing_past_the_damage(tmp_path, files, damaged):
    # The filesystem reads through the seekable decryptor, not the file
    # kernel: a copy out of it, block after block of fs.blocksize, stops at
    # the block of the first damaged chunk, 70. Its get_file writes as
    # agefast -d -o does: the output is replaced on success only.
    _, key, plain, _ = files
    fs = fsspec.filesystem("age", target_protocol="file", identity_file=str(key))
    copy = io.BytesIO()
    with pytest.raises(PayloadError, match="chunk 70$"), fs.open(str(damaged(300, 70))) as f:
        while data := f.read(fs.blocksize):
            copy.write(data)
    assert fs.blocksize < 70 * CHUNK_SIZE      # so that some blocks come before the damage
    assert copy.getvalue() == plain[:70 * CHUNK_SIZE // fs.blocksize * fs.blocksize]
    (tmp_path / "kept").write_bytes(b"before")
    with pytest.raises(PayloadError, match="chunk 70$"):
        fs.get_file(str(damaged(300, 70)), str(tmp_path / "kept"))
    assert (tmp_path / "kept").read_bytes() == b"before"


def command(files, decrypting):
    """The command's arguments that decrypt the sealed file, or encrypt the plaintext, to stdout."""
    folder, key, _, sealed = files
    if decrypting:
        return ["-d", "-i", key, sealed]
    return ["-r", str(identities(key)[0].to_public()), folder / "plain"]


def released(age_file, identities_):
    """The plaintext a decryptor releases from `age_file` before its payload fails."""
    class Stream:       # read as a stream, chunk after chunk: not seekable
        def __init__(self):
            self._data = io.BytesIO(age_file)

        def readinto(self, b):
            return self._data.readinto(b)

    out = bytearray()
    reader = agefast.decryptor(Stream(), identities_)
    with pytest.raises(PayloadError):
        while data := reader.read(MiB):
            out += data
    return bytes(out)


def payload_start(age_file):
    """Where the chunks of `age_file`'s payload begin: after the header's MAC line and the 16-byte nonce."""
    mac_line = age_file.index(b"\n--- ") + 1
    return age_file.index(b"\n", mac_line) + 1 + 16


def verified_plaintext(age_file, key):
    """The plaintext of `age_file`, an age file cut short after a whole chunk,
    where every chunk in it verifies: ciphertext is seen through what it
    decrypts to (a hole of zeros does not verify)."""
    sealed_chunks, rest = divmod(len(age_file) - payload_start(age_file), SEALED_CHUNK_SIZE)
    assert rest == 0
    plaintext = released(age_file, identities(key))
    assert len(plaintext) == sealed_chunks * CHUNK_SIZE
    return plaintext


def assert_whole_batches(left, plain):
    """`left`, the plaintext a full disk left, is the plaintext's first batches, one at least: the disk filled
    after the first, and the workers' batches that landed past a hole were cut back to where it began."""
    assert len(left) >= BATCH and len(left) % BATCH == 0, len(left)
    assert left == plain[:len(left)]


def _no_larger_files_than(size):
    def limit():
        # Writes past the limit fail with EFBIG rather than killing the process.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


@pytest.mark.parametrize("decrypting", [True, False])
@pytest.mark.parametrize("limit", [3 * MiB + 5, 20 * MiB + 5])
def test_a_failed_write_leaves_a_prefix_and_names_the_file(tmp_path, files, limit, decrypting):
    _, key, plain, _ = files
    args = command(files, decrypting)
    with open(tmp_path / "out", "wb") as out:
        done = run(args, stdout=out, preexec_fn=_no_larger_files_than(limit))
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == ["agefast: error: /dev/stdout: File too large"]
    # Every batch below the limit is written, whichever worker wrote it; the
    # one across it fails part way and is cut back.
    left = (tmp_path / "out").read_bytes()
    if decrypting:
        assert left == plain[:limit // BATCH * BATCH]
    else:
        sealed_batch = kernels.FILE_BATCH * SEALED_CHUNK_SIZE
        assert verified_plaintext(left, key) == plain[:(limit - payload_start(left)) // sealed_batch * BATCH]
    done = run([*args[:-1], "-o", tmp_path / "named", args[-1]], preexec_fn=_no_larger_files_than(limit))
    assert done.stderr.decode().splitlines() == [
        f'agefast: error: failed to write output file "{tmp_path / "named"}": File too large']
    assert not (tmp_path / "named").exists()


def test_a_failed_write_keeps_the_batches_before_it(tmp_path, files):
    # One worker writes its batches in order: batch 2 fails part way, 4 MiB
    # are left whole before it.
    _, key, plain, sealed = files
    limit = len(OWN) + 5 * MiB + 5
    previous = resource.getrlimit(resource.RLIMIT_FSIZE), signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    with open(sealed, "rb") as src, open(tmp_path / "out", "wb") as dst:
        dst.write(OWN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, previous[0][1]))
        try:
            with pytest.raises(OSError) as failed:
                agefast.decrypt_io(src, dst, identities(key), threads=1)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, previous[0])
            signal.signal(signal.SIGXFSZ, previous[1])
    assert (failed.value.errno, failed.value.filename) == (errno.EFBIG, str(tmp_path / "out"))
    assert (tmp_path / "out").read_bytes() == OWN + plain[:4 * MiB]


@pytest.fixture
def full_tmpfs(tmp_path):
    """A 20 MiB tmpfs: a disk that fills, where a write at any offset fails
    (RLIMIT_FSIZE fails only those past an offset, so leaves no hole to cut
    back). Mounting needs root, and a container that allows it, as CI's does."""
    need_tools("mount", "umount")
    folder = tmp_path / "tmpfs"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", folder], capture_output=True)
    if mounted.returncode != 0:
        unavailable(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    yield folder
    subprocess.run(["umount", folder], check=True)


@pytest.mark.parametrize("decrypting", [True, False])
def test_a_full_tmpfs_leaves_a_prefix_without_holes(full_tmpfs, files, decrypting):
    _, key, plain, _ = files
    args = command(files, decrypting)
    with open(full_tmpfs / "out", "wb") as out:
        done = run(args, stdout=out)
    assert done.stderr.decode().splitlines() == ["agefast: error: /dev/stdout: No space left on device"]
    left = (full_tmpfs / "out").read_bytes()
    assert len(left) <= 20 * MiB
    assert_whole_batches(left if decrypting else verified_plaintext(left, key), plain)
    os.unlink(full_tmpfs / "out")
    done = run([*args[:-1], "-o", full_tmpfs / "named", args[-1]])
    assert done.stderr.decode().splitlines() == [
        f'agefast: error: failed to write output file "{full_tmpfs / "named"}": No space left on device']
    assert os.listdir(full_tmpfs) == []


def test_decrypt_io_onto_a_full_tmpfs(full_tmpfs, files):
    _, key, plain, sealed = files
    with open(sealed, "rb") as src, open(full_tmpfs / "out", "wb") as dst:
        with pytest.raises(OSError) as failed:
            agefast.decrypt_io(src, dst, identities(key))
    assert failed.value.filename == str(full_tmpfs / "out")
    assert_whole_batches((full_tmpfs / "out").read_bytes(), plain)


def test_keygen_on_a_full_disk_leaves_no_key_file_and_tells_no_public_key(full_tmpfs):
    # It had printed "Public key: ..." for a secret it never kept (a script could encrypt to it) and left an
    # empty key file, which a retry then found in the way; the failed write named no file.
    with open(full_tmpfs / "fill", "wb") as f:
        with pytest.raises(OSError):
            while True:
                f.write(bytes(MiB))
    key = full_tmpfs / "key.txt"
    done = subprocess.run([sys.executable, "-m", "agefast.cli.keygen", "-o", key], capture_output=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [
        f'agefast-keygen: error: failed to write output file "{key}": No space left on device']
    assert not key.exists()
    # -y's recipients the same (it had left an empty file, and said "No space left on device" of no file).
    identity = full_tmpfs.parent / "identity.txt"
    identity.write_text(f"{agefast.x25519.Identity.generate()}\n")
    recipients = full_tmpfs / "recipients.txt"
    done = subprocess.run([sys.executable, "-m", "agefast.cli.keygen", "-y", "-o", recipients, identity],
                          capture_output=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [
        f'agefast-keygen: error: failed to write output file "{recipients}": No space left on device']
    assert not recipients.exists()
    # To standard output (-o "" or -o -), on the same disk: it is named, and nothing is removed (an -o ""
    # had tried to remove "", and told "No such file or directory").
    for output in ("", "-"):
        with open(full_tmpfs / "stdout", "wb") as stdout:
            done = subprocess.run([sys.executable, "-m", "agefast.cli.keygen", "-o", output], stdout=stdout,
                                  stderr=subprocess.PIPE, timeout=60)
        assert done.returncode == 1
        assert done.stderr.decode().splitlines()[-1] == (
            'agefast-keygen: error: failed to write output file "/dev/stdout": No space left on device')
        assert (full_tmpfs / "stdout").exists()


def test_rekey_on_a_full_disk_names_its_output_and_keeps_its_input(full_tmpfs, files):
    _, key, _, sealed = files
    target = full_tmpfs / "data.age"
    target.write_bytes(sealed.read_bytes()[:12 * MiB])      # whole header, a payload cut short: rekey copies it
    before = target.read_bytes()
    new = agefast.x25519.Identity.generate().to_public()
    done = subprocess.run([sys.executable, "-m", "agefast.cli.rekey", "-i", key, "-r", str(new), "-o", target, target],
                          capture_output=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [
        f'agefast-rekey: error: failed to write output file "{target}": No space left on device']
    assert target.read_bytes() == before and os.listdir(full_tmpfs) == ["data.age"]
