"""agefast-inspect: an age file's stanza types, armor, post-quantum status and
size breakdown, without a key, in age-inspect's text and JSON."""

import json
import os
import subprocess
import sys

import pytest

import agefast
from agefast.payload.rules import CHUNK_SIZE
from agefast.cli.inspect import InspectError, stream_overhead

INSPECT = [sys.executable, "-m", "agefast.cli.inspect"]


def run_inspect(*args, **kwargs):
    kwargs.setdefault("capture_output", True)
    if "input" not in kwargs:
        kwargs["stdin"] = subprocess.DEVNULL
    return subprocess.run([*INSPECT, *map(str, args)], timeout=60, **kwargs)


# age's internal/inspect TestStreamOverhead table: payload size (nonce
# included) -> overhead, or None where no payload has that size.
OVERHEADS = [
    (0, None), (15, None), (16, None), (16 + 15, None),
    (16 + 16, 32), (16 + 1 + 16, 32), (16 + CHUNK_SIZE + 16, 32),
    (16 + CHUNK_SIZE + 16 + 1, None), (16 + CHUNK_SIZE + 16 + 15, None),
    (16 + CHUNK_SIZE + 16 + 16, None), (16 + CHUNK_SIZE + 16 + 1 + 16, 48),
]


@pytest.mark.parametrize(("payload_size", "overhead"), OVERHEADS)
def test_stream_overhead(payload_size, overhead):
    if overhead is None:
        with pytest.raises(InspectError):
            stream_overhead(payload_size)
    else:
        assert stream_overhead(payload_size) == overhead


def test_text_report(tmp_path):
    recipient = agefast.x25519.Identity.generate().to_public()
    path = tmp_path / "secrets.age"
    path.write_bytes(agefast.encrypt(b"x" * 42, [recipient]))
    header = path.stat().st_size - 42 - 32
    done = run_inspect(path)
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout.decode() == f"""\
{path} is an age file, version "age-encryption.org/v1".

This file is encrypted to the following recipient types:
  - "X25519"

This file does NOT use post-quantum encryption.

Size breakdown (assuming it decrypts successfully):

    Header              {header:12d} bytes
    Encryption overhead           32 bytes
    Payload                       42 bytes
                        -------------------
    Total               {header + 74:12d} bytes

Tip: for machine-readable output, use --json.
"""


@pytest.mark.parametrize("args, named", [(["-"], b"-"), ([""], b"<stdin>"), ([], b"<stdin>")])
def test_an_input_of_dash_or_nothing_is_standard_input(args, named):
    # As age-inspect: "" had been a file that does not exist.
    done = run_inspect(*args, input=agefast.encrypt(b"x", [agefast.x25519.Identity.generate().to_public()]))
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout.startswith(named + b" is an age file")


@pytest.mark.parametrize("line_ending", [b"\n", b"\r\n"])
def test_json_armored_from_stdin(line_ending):
    identity = agefast.pq.Identity.generate()
    plaintext = b"y" * (CHUNK_SIZE + 5)
    armored = agefast.encrypt(plaintext, [identity.to_public()], armored=True).replace(b"\n", line_ending)
    done = run_inspect("-json", input=armored)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    sizes = data.pop("sizes")
    assert data == {"version": "age-encryption.org/v1", "postquantum": "yes", "armor": True,
                    "stanza_types": ["mlkem768x25519"]}
    assert sizes["min_payload"] == sizes["max_payload"] == len(plaintext)
    assert sizes["overhead"] == 16 + 2 * 16
    assert (sizes["min_padding"], sizes["max_padding"]) == (0, 0)
    # The fields add up to the file as stored, whatever its line endings.
    assert sizes["header"] + sizes["armor"] + sizes["overhead"] + sizes["min_payload"] == len(armored)
    # Go's json.Encoder with a four-space indent.
    assert done.stdout.startswith(b'{\n    "version": "age-encryption.org/v1",\n')


@pytest.mark.parametrize(("recipients", "postquantum"), [
    (lambda: [agefast.passphrase.Recipient("pw", work_factor=2)], "yes"),
    (lambda: [agefast.x25519.Identity.generate().to_public(), agefast.x25519.Identity.generate().to_public()], "no"),
])
def test_postquantum(recipients, postquantum):
    done = run_inspect("--json", input=agefast.encrypt(b"", recipients()))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["postquantum"] == postquantum


def test_unknown_stanza_types_leave_it_unknown():
    """A plugin's stanza (here a made-up one) says nothing about quantum safety."""
    header = b"age-encryption.org/v1\n-> some-plugin arg\nAAAA\n--- " + b"A" * 43 + b"\n"
    done = run_inspect("--json", input=header + bytes(16 + 16 + 3))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["postquantum"], data["stanza_types"], data["sizes"]["min_payload"]) == ("unknown", ["some-plugin"], 3)


def test_a_header_without_stanzas_is_described_as_age_inspect_describes_it():
    # age-inspect's parser reads on to the MAC line: no stanza types (null in JSON), nothing said of quantum
    # safety. agefast-inspect had failed ("header has no recipient stanzas"), as decryption rightly does.
    header = b"age-encryption.org/v1\n--- " + b"A" * 43 + b"\n"
    done = run_inspect("--json", input=header + bytes(16 + 16 + 3))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["postquantum"], data["stanza_types"], data["sizes"]["min_payload"]) == ("unknown", None, 3)
    text = run_inspect(input=header + bytes(16 + 16 + 3))
    assert text.returncode == 0 and b"recipient types:\n\n" in text.stdout, text.stdout


def test_json_escapes_html_characters_as_go_does():
    # Go's json.Encoder escapes "<", ">" and "&" (SetEscapeHTML); a stanza type may hold them.
    header = b"age-encryption.org/v1\n-> a<b&c>d\nAAAA\n--- " + b"A" * 43 + b"\n"
    done = run_inspect("--json", input=header + bytes(16 + 16 + 3))
    assert b'"a\\u003cb\\u0026c\\u003ed"' in done.stdout, done.stdout
    assert json.loads(done.stdout)["stanza_types"] == ["a<b&c>d"]


@pytest.mark.parametrize(("data", "fragment"), [
    (b"not age\n", "inspection failed: failed to read header"),
    (b"", "inspection failed: failed to read header"),
])
def test_errors(data, fragment, tmp_path):
    path = tmp_path / "bad"
    path.write_bytes(data)
    done = run_inspect(path)
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode().startswith(f"agefast-inspect: error: {fragment}")


def test_impossible_payload_size(tmp_path):
    path = tmp_path / "cut.age"
    whole = agefast.encrypt(b"z" * (CHUNK_SIZE + 1), [agefast.x25519.Identity.generate().to_public()])
    path.write_bytes(whole[:-10])  # a final chunk shorter than its tag
    done = run_inspect(path)
    assert done.returncode == 1
    header = whole.index(b"\n", whole.index(b"\n---") + 1) + 1
    sealed = len(whole) - 10 - header - 16      # less the nonce
    assert done.stderr.decode() == ("agefast-inspect: error: inspection failed: failed to compute stream overhead: "
                                    f"invalid encrypted payload size: {sealed}\n")


def test_a_damaged_armored_payload_is_a_failed_read_of_the_rest(tmp_path):
    # age-inspect's words ("failed to read rest of file: ..."), where the armor past the header is bad.
    armored = agefast.encrypt(b"z" * 1000, [agefast.x25519.Identity.generate().to_public()], armored=True)
    lines = armored.split(b"\n")
    lines[-4] = b"!" * len(lines[-4])
    done = run_inspect(input=b"\n".join(lines))
    assert done.returncode == 1
    assert done.stderr.decode().startswith("agefast-inspect: error: inspection failed: failed to read rest of file: ")


def test_usage(tmp_path):
    assert run_inspect("a", "b").returncode == 1
    helped = run_inspect("-h")
    assert (helped.returncode, helped.stderr.startswith(b"Usage:\n")) == (0, True)
    assert run_inspect("--nope").returncode == 2


@pytest.mark.parametrize("stdout", ["/dev/full", "closed pipe", "closed"])
def test_a_failed_write_to_standard_output_is_one_error_line(stdout, tmp_path):
    # It had been a traceback (OSError, BrokenPipeError: `agefast-inspect f | head`), where the other commands
    # name /dev/stdout in one line.
    path = tmp_path / "f.age"
    path.write_bytes(agefast.encrypt(b"x", [agefast.x25519.Identity.generate().to_public()]))
    if stdout == "/dev/full":
        with open("/dev/full", "wb") as full:
            done = subprocess.run([*INSPECT, path], stdout=full, stderr=subprocess.PIPE, timeout=60)
    elif stdout == "closed pipe":
        read_end, write_end = os.pipe()
        os.close(read_end)
        with open(write_end, "wb") as pipe:
            done = subprocess.run([*INSPECT, "--json", path], stdout=pipe, stderr=subprocess.PIPE, timeout=60)
    else:
        done = subprocess.run([*INSPECT, path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60,
                              preexec_fn=lambda: os.close(1))
    assert done.returncode == 1
    assert done.stderr.startswith(b'agefast-inspect: error: failed to write output file "/dev/stdout": ')
    assert done.stderr.count(b"\n") == 1
