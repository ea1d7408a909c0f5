"""encrypting_reader: an age file read out of a plaintext source (age 1.3's EncryptReader)."""

import http.server
import io
import shutil
import subprocess
import sys
import threading
import tracemalloc

import boto3
import boto3.s3.transfer
import moto
import pyrage
import pytest
import requests
from dev_mode import nothing_ignored
from streams import Trickle
from test_stream import DryOnce, NonBlocking

import agefast
from agefast import errors

CHUNK = 64 * 1024
BATCH = 16 * CHUNK  # what the reader pulls from its source at a time
IDENTITY = agefast.x25519.Identity.generate()
RECIPIENT = IDENTITY.to_public()
SIZES = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, BATCH - 1, BATCH, BATCH + 1, 2 * BATCH + CHUNK + 5]


def read_in_steps(reader, step: int) -> bytes:
    out = bytearray()
    while chunk := reader.read(step):
        out += chunk
    return bytes(out)


@pytest.mark.parametrize("armored", [False, True], ids=["binary", "armored"])
@pytest.mark.parametrize("step", [7, 4099, CHUNK + 17, BATCH + 1])
@pytest.mark.parametrize("size", SIZES)
def test_round_trip(size, step, armored, make_plaintext):
    plaintext = make_plaintext(size)
    # The source hands out odd amounts too, and cannot seek.
    reader = agefast.encrypting_reader(Trickle(plaintext, 10_007), [RECIPIENT], armored=armored)
    sealed = read_in_steps(reader, step)
    assert sealed.startswith(b"-----BEGIN AGE" if armored else b"age-encryption.org/v1\n")
    assert agefast.decrypt(sealed, [IDENTITY]) == plaintext


def test_reads_are_full_until_the_end(make_plaintext):
    # Uploaders (s3transfer's non-seekable path) take a short read for the end.
    plaintext = make_plaintext(3 * BATCH + 11)
    reader = agefast.encrypting_reader(Trickle(plaintext, 1000), [RECIPIENT])
    sizes = []
    while chunk := reader.read(300_001):
        sizes.append(len(chunk))
    assert all(n == 300_001 for n in sizes[:-1]) and 0 < sizes[-1] <= 300_001
    assert reader.read(10) == b""


@pytest.mark.parametrize("size", [0, CHUNK, BATCH + 1])
def test_readall_readinto_and_a_buffered_reader(size, make_plaintext):
    plaintext = make_plaintext(size)
    assert agefast.decrypt(agefast.encrypting_reader(io.BytesIO(plaintext), [RECIPIENT]).read(),
                           [IDENTITY]) == plaintext
    buffered = io.BufferedReader(agefast.encrypting_reader(io.BytesIO(plaintext), [RECIPIENT]))
    assert agefast.decrypt(buffered.read(), [IDENTITY]) == plaintext
    raw = agefast.encrypting_reader(io.BytesIO(plaintext), [RECIPIENT])
    assert raw.readable() and not raw.seekable() and not raw.writable()
    buf = bytearray(size + 1000)
    n = raw.readinto(buf)
    assert raw.readinto(bytearray(10)) == 0
    assert agefast.decrypt(buf[:n], [IDENTITY]) == plaintext


@pytest.mark.requires_tool("age")
@pytest.mark.parametrize("size", [1, BATCH + 7])
def test_pyrage_and_go_age_decrypt_it(size, tmp_path, make_plaintext, age_key):
    key, recipient = age_key
    plaintext = make_plaintext(size)
    for armored in (False, True):
        reader = agefast.encrypting_reader(io.BytesIO(plaintext), [agefast.x25519.Recipient.from_str(recipient)],
                                           armored=armored)
        sealed = tmp_path / "sealed.age"
        with open(sealed, "wb") as f:
            shutil.copyfileobj(reader, f)
        done = subprocess.run(["age", "-d", "-i", key, sealed], capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout == plaintext
        secret = next(line for line in key.read_text().splitlines() if line.startswith("AGE-SECRET-KEY-"))
        assert pyrage.decrypt(sealed.read_bytes(), [pyrage.x25519.Identity.from_str(secret)]) == plaintext


class Zeros(io.RawIOBase):
    """`size` zero bytes, made as they are read; then the end, or `error`."""

    def __init__(self, size: int, error: Exception | None = None):
        self._left = size
        self._error = error

    def readable(self):
        return True

    def readinto(self, b):
        if self._left == 0 and self._error is not None:
            raise self._error
        n = min(len(b), self._left)
        b[:n] = bytes(n)
        self._left -= n
        return n


class _SlowFirst(io.RawIOBase):
    """A source whose first read takes its range at once and hands it over only when `go` is set."""

    def __init__(self, data):
        self._data, self._at, self.go, self.waiting = data, 0, threading.Event(), threading.Event()

    def readable(self):
        return True

    def readinto(self, b):
        at, n = self._at, max(0, min(len(b), len(self._data) - self._at))
        self._at += n
        if at == 0:
            self.waiting.set()
            self.go.wait(10)
        b[:n] = self._data[at:at + n]
        return n


def test_reads_from_two_threads_take_turns(make_plaintext):
    # A second thread's read during the first one's refill refilled too, into the same buffer: the batches
    # were sealed out of order, a file that decrypts without error to other plaintext.
    plaintext = make_plaintext(2 * BATCH + 1000)
    source = _SlowFirst(plaintext)
    reader = agefast.encrypting_reader(source, [RECIPIENT])
    returned = [reader.read(len(agefast.encrypt(b"", [RECIPIENT])) - 16)]    # the header and nonce, no source read
    first = threading.Thread(target=lambda: returned.append(reader.read(100)))
    first.start()
    assert source.waiting.wait(10)
    second = threading.Thread(target=lambda: returned.append(reader.read(100)))
    second.start()
    second.join(0.3)
    source.go.set()
    first.join()
    second.join()
    assert agefast.decrypt(b"".join(returned) + reader.read(), [IDENTITY]) == plaintext


def test_a_failed_source_keeps_failing_and_what_came_out_never_decrypts():
    reader = agefast.encrypting_reader(Zeros(BATCH + 5, OSError("the disk went away")), [RECIPIENT])
    got = bytearray()
    with pytest.raises(OSError) as first:
        while chunk := reader.read(4096):
            got += chunk
    for _ in range(2):
        with pytest.raises(OSError) as again:
            reader.read(4096)
        assert again.value is first.value
    with pytest.raises(errors.PayloadError):
        agefast.decrypt(bytes(got), [IDENTITY])


def test_closed_early_the_output_never_decrypts(make_plaintext):
    source = io.BytesIO(make_plaintext(BATCH))
    reader = agefast.encrypting_reader(source, [RECIPIENT], close_src=True)
    got = reader.read(BATCH)  # all of the plaintext is in, but the source has not said it ended
    reader.close()
    assert source.closed
    with pytest.raises(ValueError):
        reader.read(1)
    with pytest.raises(errors.PayloadError):
        agefast.decrypt(got, [IDENTITY])


def test_a_non_blocking_source_loses_nothing(make_plaintext):
    plaintext = make_plaintext(2 * BATCH + 3)
    reader = agefast.encrypting_reader(NonBlocking(plaintext, 70_000), [RECIPIENT])
    got = bytearray()
    while True:
        try:
            chunk = reader.read(100_000)
        except BlockingIOError:
            continue
        if not chunk:
            break
        got += chunk
    assert agefast.decrypt(bytes(got), [IDENTITY]) == plaintext


def test_a_read_of_all_that_finds_the_source_dry_returns_what_it_read(make_plaintext):
    # read() dropped the ciphertext it had gathered, the header with it, when the source ran dry.
    plaintext = make_plaintext(3 * BATCH + 5)
    source = DryOnce(plaintext, 2 * BATCH)
    reader = agefast.encrypting_reader(source, [RECIPIENT])
    got = reader.read()
    assert len(got) > BATCH
    with pytest.raises(BlockingIOError):
        reader.read()
    source.ready = True
    assert agefast.decrypt(got + reader.read(), [IDENTITY]) == plaintext


def test_a_read_only_buffer_is_refused_before_the_source_is_read(make_plaintext):
    plaintext = make_plaintext(CHUNK + 10)
    reader = agefast.encrypting_reader(Trickle(plaintext), [RECIPIENT])
    with pytest.raises(TypeError, match="writable"):
        reader.readinto(bytes(100))
    assert agefast.decrypt(reader.read(), [IDENTITY]) == plaintext


def test_a_small_file_pulls_a_chunk_not_a_batch():
    # A reader of a 1 KiB upload cleared a whole batch's buffer (1 MiB) to read it into.
    agefast.encrypting_reader(io.BytesIO(b"first"), [RECIPIENT]).read()     # what a first use imports, not traced
    tracemalloc.start()
    try:
        sealed = agefast.encrypting_reader(io.BytesIO(b"x" * 1024), [RECIPIENT]).read()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 6 * CHUNK
    assert agefast.decrypt(sealed, [IDENTITY]) == b"x" * 1024


def test_memory_stays_constant():
    size = 64 * 1024 * 1024
    tracemalloc.start()
    try:
        reader = agefast.encrypting_reader(Zeros(size), [RECIPIENT], threads=1)
        total = 0
        while chunk := reader.read(1 << 20):
            total += len(chunk)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    header_and_nonce = len(agefast.encrypt(b"", [RECIPIENT])) - 16  # one X25519 stanza: a fixed size
    assert total == header_and_nonce + size + size // CHUNK * 16
    assert peak < 12 * 1024 * 1024  # a few 1 MiB batches (6 MiB measured), not 64 MiB


def test_wrong_arguments_are_refused_before_reading():
    source = io.BytesIO(b"plaintext")
    with pytest.raises(TypeError):
        agefast.encrypting_reader("not a file", [RECIPIENT])
    with pytest.raises(TypeError):
        agefast.encrypting_reader(source, [IDENTITY])
    with pytest.raises(agefast.EncryptError, match="Missing recipients"):
        agefast.encrypting_reader(source, [])
    assert source.tell() == 0


def test_a_refused_reader_leaves_its_finaliser_nothing_to_fail_on():
    # IOBase's finaliser closes even a reader whose __init__ raised; close()
    # then found no encryptor to abort: "Exception ignored ... AttributeError",
    # which Python 3.13 prints, and 3.11 in development mode.
    script = ("import gc, io, agefast\n"
              "for recipients in ('not a list', []):\n"
              "    try:\n"
              "        agefast.encrypting_reader(io.BytesIO(b'plaintext'), recipients)\n"
              "    except (TypeError, agefast.EncryptError):\n"
              "        pass\n"
              "gc.collect()\n")
    nothing_ignored(script)


class _Upload(http.server.BaseHTTPRequestHandler):
    """Stores the body of a POST, chunked (as requests sends a stream of
    unknown length) or not."""

    received: list = []

    def do_POST(self):
        if self.headers.get("Transfer-Encoding") == "chunked":
            body = bytearray()
            while size := int(self.rfile.readline().strip(), 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append(bytes(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_requests_streams_it_to_a_server(make_plaintext):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upload)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        plaintext = make_plaintext(3 * BATCH + 99)
        reader = agefast.encrypting_reader(io.BytesIO(plaintext), [RECIPIENT])
        response = requests.post(f"http://127.0.0.1:{server.server_port}/upload", data=reader, timeout=60)
        assert response.status_code == 204
    finally:
        server.shutdown()
        server.server_close()
    assert agefast.decrypt(_Upload.received[-1], [IDENTITY]) == plaintext


def test_boto3_upload_fileobj_streams_it_in_parts(make_plaintext, monkeypatch):
    # moto serves S3 in-process. Parts of 5 MiB, S3's minimum, over a source
    # that cannot seek: s3transfer reads each part with one read(5 MiB).
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    plaintext = make_plaintext(12 * 1024 * 1024 + 5)
    config = boto3.s3.transfer.TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)
    with moto.mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="sealed")
        s3.upload_fileobj(agefast.encrypting_reader(Trickle(plaintext, 100_000), [RECIPIENT]), "sealed", "file.age",
                          Config=config)
        etag = s3.head_object(Bucket="sealed", Key="file.age")["ETag"]
        stored = s3.get_object(Bucket="sealed", Key="file.age")["Body"].read()
    assert etag.endswith('-3"')  # a multipart upload of three parts
    assert agefast.decrypt(stored, [IDENTITY]) == plaintext


def test_the_io_contract_for_what_each_stream_is_not():
    # A reader is not written, an encryptor not read (io.UnsupportedOperation, not NotImplementedError); read(None)
    # reads all, as a file's does; a closed encryptor says so (ValueError), as a closed file does.
    identity = agefast.x25519.Identity.generate()
    reader = agefast.encrypting_reader(io.BytesIO(b"plain"), [identity.to_public()])
    with pytest.raises(io.UnsupportedOperation):
        reader.write(b"x")
    assert agefast.decrypt(reader.read(None), [identity]) == b"plain"
    encryptor = agefast.encryptor(io.BytesIO(), [identity.to_public()])
    with pytest.raises(io.UnsupportedOperation):
        encryptor.read(1)
    encryptor.close()
    with pytest.raises(ValueError):
        encryptor.writable()


def test_the_package_s_names_stay_what_they_name_whatever_is_imported_first():
    # agefast.EncryptingReader first imported the module agefast.encrypting_reader, which became the package's
    # attribute of that name: agefast.encrypting_reader(...) then called a module. New processes: nothing
    # imported, the names in order (the classes first); then every module of the package imported by its name
    # first (as `from agefast.x import y` or unpickling does), and the names in reverse order.
    script = ("import agefast, importlib, pkgutil, sys, types\n"
              "modules = sys.argv[1] == 'modules'\n"
              "if modules:\n"
              "    for m in pkgutil.iter_modules(agefast.__path__):\n"
              "        importlib.import_module(f'agefast.{m.name}')\n"
              "print([n for n in sorted(agefast.__all__, reverse=modules)\n"
              "       if isinstance(getattr(agefast, n), types.ModuleType) != (n in agefast._MODULES)])\n")
    for first in ("names", "modules"):
        done = subprocess.run([sys.executable, "-c", script, first], capture_output=True, text=True, check=True)
        assert done.stdout == "[]\n", (first, done.stdout)
