"""agefast.tree and agefast-tree: whole trees encrypted, decrypted, re-keyed and verified, resumably."""

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import time
import types

import pytest

import agefast
from agefast import tree, x25519
from required import need_module
from ssh_keys import ssh_keys  # noqa: F401 (a fixture)
from agefast.payload.rules import CHUNK_SIZE

# Names a tree job must carry as they are: spaces, a newline, bytes that are not UTF-8, nesting.
NAMES = [b"plain.txt", b"with space.bin", b"new\nline", b"caf\xe9-latin1", b"a/b/c/deep.dat", b"a/empty",
         b"a/b/two chunks"]


def _make_tree(root, make_plaintext, names=NAMES):
    contents = {}
    for i, name in enumerate(names):
        path = os.path.join(os.fsencode(root), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        size = 0 if name.endswith(b"empty") else CHUNK_SIZE + 100 if name.endswith(b"chunks") else 1000 + i
        contents[name] = make_plaintext(size, i)
        with open(path, "wb") as f:
            f.write(contents[name])
    return contents


def _read(root, name):
    with open(os.path.join(os.fsencode(root), name), "rb") as f:
        return f.read()


def _nonce_and_shares(data):
    """The payload nonce and every X25519 share of a binary age file."""
    header, _, rest = data.partition(b"\n--- ")
    shares = [line.split()[2] for line in header.split(b"\n") if line.startswith(b"-> X25519 ")]
    return rest.split(b"\n", 1)[1][:16], shares


@pytest.mark.parametrize("workers", [1, 2])
def test_a_tree_goes_there_and_back(tmp_path, make_plaintext, workers):
    identity = x25519.Identity.generate()
    contents = _make_tree(tmp_path / "src", make_plaintext)
    summary = tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], workers=workers)
    assert (summary.done, summary.failed, summary.skipped, summary.passed) == (len(NAMES), 0, 0, 0)
    seen = set()
    for name, plain in contents.items():
        sealed = _read(tmp_path / "enc", name + b".age")
        assert agefast.decrypt(sealed, [identity]) == plain
        nonce, shares = _nonce_and_shares(sealed)
        assert len(shares) == 1
        seen |= {nonce, *shares}
    # every file its own payload nonce and ephemeral share
    assert len(seen) == 2 * len(NAMES)
    summary = tree.decrypt(tmp_path / "enc", tmp_path / "dec", [identity], workers=workers)
    assert (summary.done, summary.failed) == (len(NAMES), 0)
    for name, plain in contents.items():
        assert _read(tmp_path / "dec", name) == plain


@pytest.mark.requires_tool("age", "age-keygen")
def test_go_age_opens_every_output_and_a_rekeyed_tree_only_with_the_new_key(tmp_path, make_plaintext, age_key):
    key_path, recipient = age_key
    contents = _make_tree(tmp_path / "src", make_plaintext)
    identity = x25519.Identity.generate()
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()])
    summary = tree.rekey(tmp_path / "enc", [identity], agefast.parse_recipients(recipient))
    assert (summary.done, summary.failed) == (len(NAMES), 0)
    for name, plain in contents.items():
        path = os.path.join(os.fsencode(tmp_path / "enc"), name + b".age")
        opened = subprocess.run(["age", "-d", "-i", key_path, path], capture_output=True, check=True)
        assert opened.stdout == plain
        with pytest.raises(agefast.errors.NoIdentityMatchError):
            agefast.decrypt(_read(tmp_path / "enc", name + b".age"), [identity])


def test_a_rerun_does_only_what_is_left(tmp_path, make_plaintext):
    identity = x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext)
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], workers=1)
    stamps = {name: os.stat(os.path.join(os.fsencode(tmp_path / "enc"), name + b".age")).st_mtime_ns
              for name in NAMES}
    os.unlink(os.path.join(os.fsencode(tmp_path / "enc"), b"plain.txt.age"))    # an output lost
    with open(os.path.join(os.fsencode(tmp_path / "src"), b"a/empty"), "wb") as f:
        f.write(b"changed")                                                    # a source changed
    summary = tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], workers=1)
    assert (summary.done, summary.skipped) == (2, len(NAMES) - 2)
    assert sorted(os.fsencode(r["source"]) for r in summary.records if r["status"] == "done") == \
        [b"a/empty", b"plain.txt"]
    # The others are in the records (and the report) too, done before (they had been left out).
    before = {os.fsencode(r["source"]): r["size"] for r in summary.records if r["status"] == "done before"}
    assert before == {name: len(_read(tmp_path / "src", name)) for name in set(NAMES) - {b"plain.txt", b"a/empty"}}
    for name in set(NAMES) - {b"plain.txt", b"a/empty"}:
        assert os.stat(os.path.join(os.fsencode(tmp_path / "enc"), name + b".age")).st_mtime_ns == stamps[name]
    assert agefast.decrypt(_read(tmp_path / "enc", b"a/empty.age"), [identity]) == b"changed"
    summary = tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], workers=1, force=True)
    assert summary.done == len(NAMES)
    # other recipients, or armor: every output is made again, for them
    other = x25519.Identity.generate()
    assert tree.encrypt(tmp_path / "src", tmp_path / "enc", [other.to_public()], workers=1).done == len(NAMES)
    assert tree.encrypt(tmp_path / "src", tmp_path / "enc", [other.to_public()], workers=1).done == 0
    assert tree.encrypt(tmp_path / "src", tmp_path / "enc", [other.to_public()], workers=1,
                        armored=True).done == len(NAMES)
    assert _read(tmp_path / "enc", b"plain.txt.age").startswith(b"-----BEGIN AGE ENCRYPTED FILE-----")
    assert agefast.decrypt(_read(tmp_path / "enc", b"plain.txt.age"), [other]) == _read(tmp_path / "src", b"plain.txt")


def test_a_manifest_line_of_another_format_is_ignored_whatever_it_holds(tmp_path, make_plaintext):
    # JSON nested 200,000 deep had ended the run with a RecursionError traceback.
    identity = x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext)
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], workers=1)
    with open(tmp_path / "enc" / ".agefast-tree.jsonl", "a") as f:
        f.write("[" * 200_000 + "\n" + '"a string"\n' + '{"source": 5}\n' + "{not json\n")
    assert tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], workers=1).skipped == len(NAMES)


def test_a_second_rekey_for_other_recipients_is_done_not_skipped(tmp_path, make_plaintext):
    first, second, third = (x25519.Identity.generate() for _ in range(3))
    contents = _make_tree(tmp_path / "src", make_plaintext)
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [first.to_public()])
    assert tree.rekey(tmp_path / "enc", [first], [second.to_public()]).done == len(NAMES)
    assert tree.rekey(tmp_path / "enc", [second], [second.to_public()]).skipped == len(NAMES)
    assert tree.rekey(tmp_path / "enc", [second], [third.to_public()]).done == len(NAMES)
    for name, plain in contents.items():
        assert agefast.decrypt(_read(tmp_path / "enc", name + b".age"), [third]) == plain


def test_rekeying_in_place_syncs_each_output_before_it_replaces_the_only_copy(tmp_path, make_plaintext, monkeypatch):
    import agefast.io.replace

    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext)
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [old.to_public()], workers=1)
    synced = []
    monkeypatch.setattr(agefast.io.replace.os, "fsync", synced.append)
    tree.decrypt(tmp_path / "enc", tmp_path / "dec", [old], workers=1)
    assert synced == []     # the inputs are still there: nothing to sync for
    assert tree.rekey(tmp_path / "enc", [old], [new.to_public()], workers=1).done == len(NAMES)
    # Each output before its input is checked (a write to the input during a long sync would go with the
    # rename), again by the rename's own durability (nothing left to write then), then its folder.
    assert len(synced) == 3 * len(NAMES)


def test_a_file_failed_after_it_was_done_is_still_done_before(tmp_path, make_plaintext):
    # The manifest's last line for a file had decided: a line it failed on after it was done (a run with --force
    # whose identities no longer open it, or a run at the same time that found it changed) hid the line saying
    # what is there, and every rerun of the same command failed the file again (found by a probe of the tree).
    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext)
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [old.to_public()], workers=1)
    assert tree.rekey(tmp_path / "enc", [old], [new.to_public()], workers=1).done == len(NAMES)
    forced = tree.rekey(tmp_path / "enc", [old], [new.to_public()], workers=1, force=True)
    assert (forced.done, forced.failed) == (0, len(NAMES))
    again = tree.rekey(tmp_path / "enc", [old], [new.to_public()], workers=1)
    assert (again.done, again.failed, again.skipped) == (0, 0, len(NAMES)), again.records


@pytest.mark.parametrize("when", ["read", "synced"])
def test_rekeying_in_place_leaves_a_file_written_meanwhile_as_its_writer_leaves_it(tmp_path, make_plaintext,
                                                                                  monkeypatch, when,
                                                                                  written_while_synced):
    # A file read whole (up to IN_MEMORY) and appended to before its output took its name: the rename had
    # dropped what was appended. So had a file appended to while its result was synced, after the check.
    from agefast.tree import store

    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext, [b"small"])
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [old.to_public()], workers=1)
    path = tmp_path / "enc" / "small.age"
    real = store.Local.read

    def read_then_appended(self, name):
        data = real(self, name)
        with open(path, "ab") as f:
            f.write(b"more")
        return data
    if when == "read":
        monkeypatch.setattr(store.Local, "read", read_then_appended)
    else:
        written_while_synced(path)
    before = path.read_bytes()
    summary = tree.rekey(tmp_path / "enc", [old], [new.to_public()], workers=1)
    [failed] = [r for r in summary.records if r["status"] == "failed"]
    assert "the file changed while it was re-keyed: left as it is" in failed["error"]
    assert path.read_bytes() == before + b"more"


@pytest.mark.parametrize("streamed", [False, True])
def test_a_damaged_file_fails_alone_and_is_named_with_its_chunk(tmp_path, make_plaintext, monkeypatch, streamed):
    if streamed:    # every file through the file driver, as files past LOCAL_IN_MEMORY go
        monkeypatch.setattr(tree.files, "LOCAL_IN_MEMORY", -1)
    identity = x25519.Identity.generate()
    contents = _make_tree(tmp_path / "src", make_plaintext)
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()])
    damaged = os.path.join(os.fsencode(tmp_path / "enc"), b"a/b/two chunks.age")
    data = bytearray(_read(tmp_path / "enc", b"a/b/two chunks.age"))
    data[-50] ^= 1                       # in the second chunk, the final one
    with open(damaged, "wb") as f:
        f.write(data)
    for operation in (tree.verify, lambda src, ids: tree.decrypt(src, tmp_path / "dec", ids)):
        summary = operation(tmp_path / "enc", [identity])
        failed = [r for r in summary.records if r["status"] == "failed"]
        assert [(r["source"], r["chunk"]) for r in failed] == [("a/b/two chunks.age", 1)]
        assert summary.done == len(NAMES) - 1
    assert not os.path.exists(os.path.join(os.fsencode(tmp_path / "dec"), b"a/b/two chunks"))
    for name in set(NAMES) - {b"a/b/two chunks"}:
        assert _read(tmp_path / "dec", name) == contents[name]


def test_links_and_special_files_are_left_and_told(tmp_path, make_plaintext):
    _make_tree(tmp_path / "src", make_plaintext, [b"file"])
    outside = tmp_path / "outside"
    outside.write_bytes(b"not to be read")
    os.symlink(outside, tmp_path / "src" / "link")
    os.symlink(tmp_path, tmp_path / "src" / "folder-link")
    os.mkfifo(tmp_path / "src" / "fifo")
    summary = tree.encrypt(tmp_path / "src", tmp_path / "enc", [x25519.Identity.generate().to_public()])
    passed = {r["source"]: r["reason"] for r in summary.records if r["status"] == "passed"}
    assert passed == {"link": "a symbolic link, not followed", "folder-link": "a symbolic link, not followed",
                      "fifo": "not a regular file"}
    assert sorted(os.listdir(tmp_path / "enc")) == [".agefast-tree.jsonl", "file.age"]


def test_no_link_below_a_root_is_followed_by_a_write_or_a_read(tmp_path, make_plaintext):
    from agefast.tree import store

    identity = x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext, [b"top", b"sub/file", b"keys/key.txt"])
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "dst").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "dst" / "sub")
    summary = tree.encrypt(tmp_path / "src", tmp_path / "dst", [identity.to_public()])
    failed = {r["source"]: r["error"] for r in summary.records if r["status"] == "failed"}
    assert failed == {"sub/file": f"[Errno {errno.ELOOP}] a symbolic link, not followed: '{tmp_path / 'dst/sub'}'"}
    assert summary.done == 2 and os.listdir(tmp_path / "elsewhere") == []
    # A folder of DST linked to the identity's: decrypting keys/key.txt.age there would replace the identity.
    key_folder = tmp_path / "k"
    key_folder.mkdir()
    (key_folder / "key.txt").write_text(str(identity) + "\n")
    (tmp_path / "restored").mkdir()
    os.symlink(key_folder, tmp_path / "restored" / "keys")
    summary = tree.decrypt(tmp_path / "dst", tmp_path / "restored", [identity])
    assert [r["source"] for r in summary.records if r["status"] == "failed"] == ["keys/key.txt.age"]
    assert (key_folder / "key.txt").read_text() == str(identity) + "\n"
    assert (tmp_path / "restored" / "top").read_bytes() == (tmp_path / "src" / "top").read_bytes()

    # Reads: a link put in a file's or a folder's place after the walk, and a FIFO, which must not block.
    src = tmp_path / "src"
    os.symlink(tmp_path / "k" / "key.txt", src / "link")
    os.symlink(key_folder, src / "folder-link")
    os.mkfifo(src / "fifo")
    local = store.Local(os.fsencode(src))
    not_followed = "a symbolic link, not followed"
    for path, error in ((b"link", not_followed), (b"folder-link/key.txt", not_followed), (b"fifo", "not a regular file")):
        with pytest.raises(OSError, match=error):
            local.read(path)
    assert local.read(b"sub/file") == (src / "sub" / "file").read_bytes()


def test_without_folder_descriptors_a_link_below_a_root_is_refused_too(tmp_path, monkeypatch):
    # Where os.open takes no dir_fd (Windows), each part of a path is looked at before the open.
    from agefast.tree import store

    class Os:
        def __getattr__(self, name):
            return getattr(os, name)

        supports_dir_fd = frozenset()

    monkeypatch.setattr(store, "os", Os())
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "f").write_bytes(b"outside")
    (tmp_path / "root").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "root" / "link")
    local = store.Local(os.fsencode(tmp_path / "root"))
    local.put(b"a/b/f", b"inside", lambda stat: None)
    assert local.read(b"a/b/f") == b"inside"
    for refused in (lambda: local.put(b"link/g", b"x", lambda stat: None), lambda: local.read(b"link/f")):
        with pytest.raises(OSError, match="a symbolic link, not followed"):
            refused()
    assert os.listdir(tmp_path / "elsewhere") == ["f"]


def test_no_output_replaces_a_key_file_the_manifest_or_an_input(tmp_path, make_plaintext):
    identity = x25519.Identity.generate()
    contents = _make_tree(tmp_path / "src", make_plaintext, [b"key.txt", b"other", b".agefast-tree.jsonl"])
    # The walk leaves the source's own manifest out: a file of that name comes from elsewhere.
    os.rename(tmp_path / "src" / ".agefast-tree.jsonl", tmp_path / "src" / "x")
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()])
    os.rename(tmp_path / "enc" / "x.age", tmp_path / "enc" / ".agefast-tree.jsonl.age")
    (tmp_path / "restored").mkdir()
    key = tmp_path / "restored" / "key.txt"
    key.write_text(str(identity) + "\n")
    summary = tree.decrypt(tmp_path / "enc", tmp_path / "restored", [identity], keep=[key])
    failed = {r["source"]: r["error"] for r in summary.records if r["status"] == "failed"}
    assert failed == {
        "key.txt.age": f"[Errno {errno.EPERM}] a key file of this job, not replaced: '{key}'",
        ".agefast-tree.jsonl.age": f"[Errno {errno.EPERM}] the manifest's name, not replaced: '.agefast-tree.jsonl'"}
    assert key.read_text() == str(identity) + "\n"
    assert (tmp_path / "restored" / "other").read_bytes() == contents[b"other"]
    manifest = (tmp_path / "restored" / ".agefast-tree.jsonl").read_text().splitlines()
    assert {json.loads(line)["source"]: json.loads(line)["status"] for line in manifest} == {
        "other.age": "done", "key.txt.age": "failed", ".agefast-tree.jsonl.age": "failed"}
    with pytest.raises(TypeError, match="iterable of paths"):
        tree.decrypt(tmp_path / "enc", tmp_path / "restored", [identity], keep=str(key))
    # The command keeps its -i files.
    done = _tree_command("decrypt", "-i", key, "--force", tmp_path / "enc", tmp_path / "restored")
    assert done.returncode == 1
    assert f"key.txt.age: [Errno {errno.EPERM}] a key file of this job, not replaced".encode() in done.stderr
    # And the files agefast -o keeps besides (an -i file's PATH.pub, read for a protected SSH key's public key):
    # it had been replaced.
    public = tmp_path / "restored" / "key.txt.pub"
    public.write_text("public\n")
    (tmp_path / "enc" / "key.txt.pub.age").write_bytes(agefast.encrypt(b"replaced", [identity.to_public()]))
    done = _tree_command("decrypt", "-i", key, "--force", tmp_path / "enc", tmp_path / "restored")
    assert f"key.txt.pub.age: [Errno {errno.EPERM}] a key file of this job, not replaced".encode() in done.stderr
    assert public.read_text() == "public\n"
    os.unlink(tmp_path / "enc" / "key.txt.pub.age")
    # Nor does its report replace one.
    done = _tree_command("verify", "-i", key, "--report", key, tmp_path / "enc")
    assert done.returncode == 1
    assert done.stderr.decode() == f'agefast-tree: error: input and output file are the same: "{key}"\n'
    assert key.read_text() == str(identity) + "\n"

    # A source inside the destination: data/x would go to DST/data/x.age, which is the input data/../x.age.
    inner = tmp_path / "d" / "data"
    _make_tree(inner, make_plaintext, [b"data/x", b"x.age"])
    before = (inner / "x.age").read_bytes()
    summary = tree.encrypt(inner, tmp_path / "d", [identity.to_public()])
    failed = {r["source"]: r["error"] for r in summary.records if r["status"] == "failed"}
    assert failed == {"data/x": f"[Errno {errno.EPERM}] inside the source, where an output could replace an input: "
                                "not written: 'data/x.age'"}
    assert (inner / "x.age").read_bytes() == before
    assert agefast.decrypt((tmp_path / "d" / "x.age.age").read_bytes(), [identity]) == before


def test_the_manifest_is_never_written_through_a_link_nor_onto_a_key_file_nor_waited_for(tmp_path, make_plaintext):
    identity = x25519.Identity.generate()
    key = tmp_path / "key.txt"
    key.write_text(str(identity) + "\n")
    _make_tree(tmp_path / "src", make_plaintext, [b"file"])
    manifest = tmp_path / "dst" / ".agefast-tree.jsonl"
    manifest.parent.mkdir()
    planted = {"a symbolic link": lambda: os.symlink(key, manifest),
               "a hard link": lambda: os.link(key, manifest),
               "a FIFO": lambda: os.mkfifo(manifest),    # opening one to append would wait for a reader
               "a folder": lambda: manifest.mkdir()}
    errors = {"a symbolic link": "the manifest is a symbolic link, not followed",
              "a hard link": r"the manifest has another name \(a hard link\), not written",
              "a FIFO": "the manifest is not a regular file", "a folder": "the manifest is not a regular file"}
    for what, plant in planted.items():
        plant()
        for force in (False, True):
            with pytest.raises(OSError, match=errors[what]) as refused:
                tree.encrypt(tmp_path / "src", tmp_path / "dst", [identity.to_public()], force=force)
            assert refused.value.filename == str(manifest)
        assert key.read_text() == str(identity) + "\n", what
        (manifest.rmdir if what == "a folder" else manifest.unlink)()
    # A key file of the job as the manifest itself (its only name).
    os.rename(key, manifest)
    with pytest.raises(OSError, match="the manifest is a key file of this job, not written"):
        tree.encrypt(tmp_path / "src", tmp_path / "dst", [identity.to_public()], keep=[manifest])
    assert manifest.read_text() == str(identity) + "\n"


def test_the_report_is_whole_or_not_at_all_and_never_over_the_jobs_files(tmp_path, make_plaintext, monkeypatch):
    identity = x25519.Identity.generate()
    key = tmp_path / "key.txt"
    key.write_text(str(identity) + "\n")
    _make_tree(tmp_path / "src", make_plaintext, [b"a", b"b"])
    recipients = [identity.to_public()]
    for report in (tmp_path / "src" / "a", tmp_path / "dst" / "report", tmp_path / "dst" / ".agefast-tree.jsonl"):
        with pytest.raises(tree.RootsRefused, match="where it could replace one of the job's files"):
            tree.encrypt(tmp_path / "src", tmp_path / "dst", recipients, report=report)
    with pytest.raises(tree.RootsRefused, match="is a key file of this job"):
        tree.encrypt(tmp_path / "src", tmp_path / "dst", recipients, report=key, keep=[key])
    with pytest.raises(tree.RootsRefused, match="is a key file of this job"):
        tree.verify(tmp_path / "src", [identity], report=key, keep=[key])
    assert key.read_text() == str(identity) + "\n" and not (tmp_path / "dst").exists()

    report = tmp_path / "report.jsonl"
    tree.encrypt(tmp_path / "src", tmp_path / "dst", recipients, report=report)
    before = report.read_bytes()
    assert len(before.splitlines()) == 2
    lines = []

    def failing(record):
        if lines:
            raise OSError(errno.ENOSPC, "No space left on device")
        lines.append(record)
        return b"{}\n"

    monkeypatch.setattr(tree.manifest, "line", failing)
    with pytest.raises(OSError):
        tree.verify(tmp_path / "dst", [identity], report=report)
    assert report.read_bytes() == before
    monkeypatch.undo()

    done = _tree_command("verify", "-i", key, "--report", "-", tmp_path / "dst")
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(line)["source"] for line in done.stdout.splitlines()) == ["a.age", "b.age"]
    assert not (tmp_path / "-").exists()


def test_the_report_is_checked_before_the_job_whatever_the_stores(tmp_path, make_plaintext):
    # Over a key file with only fsspec stores (the key files had been checked against local stores only), and
    # into a folder that is not there or onto a folder (the job had run whole first, its failures untold).
    identity = x25519.Identity.generate()
    key = tmp_path / "key.txt"
    key.write_text(str(identity) + "\n")
    src = f"memory://{tmp_path.name}/src"
    _make_tree(tmp_path / "plain", make_plaintext, [b"a"])
    tree.encrypt(tmp_path / "plain", src, [identity.to_public()], workers=1)
    with pytest.raises(tree.RootsRefused, match="is a key file of this job"):
        tree.verify(src, [identity], report=key, keep=[key], workers=1)
    assert key.read_text() == str(identity) + "\n"
    (tmp_path / "link").symlink_to(tmp_path / "nowhere" / "r.jsonl")    # written through to its target's folder
    for report, error in ((tmp_path / "nowhere" / "r.jsonl", FileNotFoundError), (tmp_path, IsADirectoryError),
                          (key / "r.jsonl", NotADirectoryError), (tmp_path / "link", FileNotFoundError)):
        with pytest.raises(error) as refused:
            tree.encrypt(tmp_path / "plain", tmp_path / "out", [identity.to_public()], report=report)
        assert refused.value.filename == str(report)
        assert not (tmp_path / "out").exists()


@pytest.mark.requires_root("bind mounts")
def test_a_folder_met_again_through_a_bind_mount_is_the_same_folder(tmp_path, make_plaintext):
    from required import need_tools, unavailable

    need_tools("mount", "umount")
    identity = x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext, [b"x", b"data/data/y"])
    before = agefast.encrypt(b"another file", [identity.to_public()])
    (tmp_path / "src" / "x.age").write_bytes(before)
    for mount in (tmp_path / "same", tmp_path / "parent", tmp_path / "dst" / "part"):
        mount.mkdir(parents=True)
    mounts = [(tmp_path / "src", tmp_path / "same"), (tmp_path, tmp_path / "parent"),
              (tmp_path / "src" / "data", tmp_path / "dst" / "part")]
    for source, mount in mounts:
        bound = subprocess.run(["mount", "--bind", source, mount], capture_output=True)
        if bound.returncode != 0:
            unavailable(f"cannot bind-mount: {bound.stderr.decode().strip()}")
    try:
        # DST is SRC by another path: refused, as SRC SRC is.
        with pytest.raises(tree.RootsRefused, match="inside the source"):
            tree.encrypt(tmp_path / "src", tmp_path / "same", [identity.to_public()])
        # SRC inside DST by another path: SRC's data/y would go to DST/data/y.age, which is SRC/y.age.
        summary = tree.encrypt(tmp_path / "src" / "data", tmp_path / "parent" / "src", [identity.to_public()])
        assert summary.done == 0
        assert [r["error"] for r in summary.records if r["status"] == "failed"] == [
            f"[Errno {errno.EPERM}] inside the source, where an output could replace an input: not written: "
            "'data/y.age'"]
        # A part of SRC shown inside DST: SRC's part/x would go to DST/part/x.age, which is SRC/data/x.age, an
        # input it had replaced (a probe's find).
        (tmp_path / "src" / "data" / "x.age").write_bytes(before)
        (tmp_path / "src" / "part").mkdir()
        (tmp_path / "src" / "part" / "x").write_bytes(b"plain")
        summary = tree.encrypt(tmp_path / "src", tmp_path / "dst", [identity.to_public()], workers=1)
        failed = {r["source"]: r["error"] for r in summary.records if r["status"] == "failed"}
        assert set(failed) == {"part/x"} and "a folder of the source tree (a bind mount shows it here)" in (
            failed["part/x"])
    finally:
        for _, mount in reversed(mounts):
            subprocess.run(["umount", mount], check=True)
    assert (tmp_path / "src" / "x.age").read_bytes() == before
    assert (tmp_path / "src" / "data" / "x.age").read_bytes() == before


def test_a_file_named_only_age_fails_alone_with_a_clear_error(tmp_path):
    identity = x25519.Identity.generate()
    for name in (".age", "sub/.age", "sub/kept.age"):
        (tmp_path / "enc" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "enc" / name).write_bytes(agefast.encrypt(name.encode(), [identity.to_public()]))
    summary = tree.decrypt(tmp_path / "enc", tmp_path / "dec", [identity])
    failed = {r["source"]: r["error"] for r in summary.records if r["status"] == "failed"}
    error = f"[Errno {errno.EINVAL}] a file named .age, which leaves its output no name"
    assert failed == {".age": error, "sub/.age": error} and summary.done == 1
    assert (tmp_path / "dec" / "sub" / "kept").read_bytes() == b"sub/kept.age"


def test_a_local_name_holding_two_colons_is_a_local_folder(tmp_path, make_plaintext):
    # Not a chained fsspec URL ("a" is no protocol): encrypted into a::b itself, not into a folder "a:".
    identity = x25519.Identity.generate()
    contents = _make_tree(tmp_path / "src", make_plaintext, [b"f"])
    summary = tree.encrypt(tmp_path / "src", tmp_path / "a::b", [identity.to_public()])
    assert summary.done == 1
    assert agefast.decrypt((tmp_path / "a::b" / "f.age").read_bytes(), [identity]) == contents[b"f"]
    assert sorted(os.listdir(tmp_path)) == ["a::b", "src"]


def test_a_destination_inside_the_source_is_refused(tmp_path, make_plaintext):
    _make_tree(tmp_path / "src", make_plaintext, [b"file"])
    with pytest.raises(tree.RootsRefused, match="inside the source"):
        tree.encrypt(tmp_path / "src", tmp_path / "src" / "out", [x25519.Identity.generate().to_public()])
    assert os.listdir(tmp_path / "src") == ["file"]
    recipient = x25519.Identity.generate().to_public()
    done = _tree_command("encrypt", "-r", recipient, tmp_path / "src", tmp_path / "src" / "out")
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [
        f"agefast-tree: error: destination {str(tmp_path / 'src' / 'out')!r} is inside the source "
        f"{str(tmp_path / 'src')!r}: its outputs would be inputs"]
    assert os.listdir(tmp_path / "src") == ["file"]


def _tree_command(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "agefast.cli.tree", *map(str, args)], capture_output=True,
                          stdin=subprocess.DEVNULL, **kwargs)


@pytest.mark.parametrize("workers", ["0", "-1", "two", "²", "٣"])
def test_workers_that_are_no_positive_number_are_a_flag_that_does_not_parse(tmp_path, workers):
    # "²" passed str.isdigit() and failed int(): a traceback. Then status 1, where the man page says 2.
    (tmp_path / "src").mkdir()
    done = _tree_command("verify", "--workers", workers, "-i", tmp_path / "none.txt", tmp_path / "src")
    assert done.returncode == 2 and "Traceback" not in done.stderr.decode()
    assert done.stderr.decode().startswith(f'invalid value "{workers}" for flag -workers: not a positive integer')


@pytest.mark.parametrize("args, status, first_line", [
    (["encrpyt"], 2, 'agefast-tree: error: unknown operation "encrpyt": use encrypt, decrypt, rekey or verify'),
    (["--version"], 0, "v"),
    (["verify", "--version"], 0, "v"),
    (["--nope"], 2, "flag provided but not defined: -nope"),
    (["-r", "age1x", "encrypt"], 2, "agefast-tree: error: the operation (encrypt, decrypt, rekey or verify) comes first"),
])
def test_what_comes_before_the_operation(args, status, first_line):
    # An operation misspelt had printed the usage alone; --version was unknown.
    done = _tree_command(*args)
    lines = (done.stdout or done.stderr).decode().splitlines()
    assert done.returncode == status and lines[0].startswith(first_line), lines


@pytest.mark.parametrize("address, fragment", [("localhost:notaport", "--dask"), ("", "--dask")])
def test_a_dask_address_the_client_refuses_is_one_error_line(tmp_path, address, fragment):
    need_module("distributed")
    (tmp_path / "src").mkdir()
    done = _tree_command("encrypt", "-r", x25519.Identity.generate().to_public(), "--dask", address,
                         tmp_path / "src", tmp_path / "enc")
    assert done.returncode == 1 and "Traceback" not in done.stderr.decode()
    assert done.stderr.decode().startswith(f"agefast-tree: error: {fragment}")


def test_dask_without_distributed_installed_is_one_error_line(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "distributed.py").write_text("raise ModuleNotFoundError('No module named distributed')\n")
    done = _tree_command("encrypt", "-r", x25519.Identity.generate().to_public(), "--dask", "tcp://127.0.0.1:1",
                         tmp_path / "src", tmp_path / "enc",
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "lib"), *sys.path])})
    assert done.returncode == 1 and "Traceback" not in done.stderr.decode()
    assert "--dask needs dask.distributed" in done.stderr.decode()


def test_a_report_not_written_still_tells_what_the_job_did(tmp_path, make_plaintext, monkeypatch):
    # The report is written after the job: its failure (a full disk) had been all the command told.
    identity = x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext)
    monkeypatch.setattr(tree, "write_all", lambda f, data: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    with pytest.raises(OSError, match="full") as e:
        tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], workers=1,
                     report=tmp_path / "report.jsonl")
    assert e.value.summary.done == len(NAMES) and not (tmp_path / "report.jsonl").exists()
    monkeypatch.undo()
    (tmp_path / "enc" / "plain.txt.age").write_bytes(b"not an age file")
    (tmp_path / "key.txt").write_text(f"{identity}\n")
    with open("/dev/full", "wb") as full:
        done = subprocess.run([sys.executable, "-m", "agefast.cli.tree", "verify", "-i", tmp_path / "key.txt",
                               "--report", "-", tmp_path / "enc"], stdout=full, stderr=subprocess.PIPE)
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1 and lines[0].startswith("agefast-tree: plain.txt.age: "), lines
    assert lines[-2].startswith(f"agefast-tree: verify: {len(NAMES) - 1} done, 1 failed")
    assert lines[-1] == "agefast-tree: error: /dev/stdout: No space left on device"


def test_the_command_reports_and_sets_the_exit_status(tmp_path, make_plaintext):
    identity = x25519.Identity.generate()
    key = tmp_path / "key.txt"
    key.write_text(str(identity) + "\n")
    _make_tree(tmp_path / "src", make_plaintext)
    done = _tree_command("encrypt", "-r", identity.to_public(), tmp_path / "src", tmp_path / "enc")
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().startswith(f"agefast-tree: encrypt: {len(NAMES)} done, 0 failed")
    with open(os.path.join(os.fsencode(tmp_path / "enc"), b"plain.txt.age"), "r+b") as f:
        f.seek(-1, os.SEEK_END)
        f.write(b"\0")
    report = tmp_path / "report.jsonl"
    checked = _tree_command("verify", "-i", key, "--report", report, tmp_path / "enc")
    assert checked.returncode == 1
    # the first chunk that fails, named once (the error had been followed by "(chunk 0)" again)
    [line] = [line for line in checked.stderr.splitlines() if line.startswith(b"agefast-tree: plain.txt.age: ")]
    assert line.count(b"chunk 0") == 1, line
    records = [json.loads(line) for line in report.read_text().splitlines()]
    assert sorted(r["status"] for r in records) == ["done"] * (len(NAMES) - 1) + ["failed"]
    usage = _tree_command("decrypt", "-r", identity.to_public(), tmp_path / "enc", tmp_path / "dec")
    assert usage.returncode == 1 and b"can't be used with decrypt" in usage.stderr


def test_a_refused_thread_ends_the_command_with_its_error(tmp_path):
    # Under a low ulimit -v the process pool forked its workers, then could not start its own thread: the run
    # printed a traceback of the pool's shutdown and then hung, the interpreter's exit waiting for the workers.
    src = tmp_path / "src"
    src.mkdir()
    for n in range(3 * 64):     # three groups of small files: work for two workers
        (src / f"f{n}").write_bytes(b"x")
    refuse = ("import sys, concurrent.futures.process as p\n"
              "def start(self): raise RuntimeError(\"can't start new thread\")\n"
              "p._ExecutorManagerThread.start = start\n"
              "from agefast.cli.tree import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    recipient = str(x25519.Identity.generate().to_public())
    with subprocess.Popen([sys.executable, "-c", refuse, "encrypt", "--workers", "2", "-r", recipient, src,
                           tmp_path / "enc"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, start_new_session=True) as run:
        try:
            _, stderr = run.communicate(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 1, stderr
    assert stderr.decode() == "agefast-tree: error: the system refused a thread (its process limits: ulimit -u, -v, -d)\n"


@pytest.mark.parametrize("lost", ["KilledWorker", "FutureCancelledError"])
def test_a_job_the_dask_cluster_lost_is_one_error_line(lost):
    # Every worker killed: the job scattered to them was forgotten, and the command ended in distributed's
    # traceback. It is a ClusterError, an OSError, which the command tells in one line.
    need_module("distributed")
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker
    from agefast.cli import outcome
    from agefast.tree import cluster

    class Lost:
        def result(self):
            if lost == "KilledWorker":
                raise KilledWorker("task-1", types.SimpleNamespace(address="tcp://127.0.0.1:1"), 0)
            raise FutureCancelledError("task-1", "already forgotten")

    with pytest.raises(cluster.ClusterError, match=f"the Dask cluster lost the job: {lost}") as e:
        cluster.result(Lost())
    assert outcome.describe(e.value).startswith("the Dask cluster lost the job")


def test_an_engine_setting_of_no_engine_fails_the_job_once_not_every_file(tmp_path, make_plaintext, engine_setting):
    _make_tree(tmp_path / "src", make_plaintext)
    engine_setting("bogus")
    with pytest.raises(agefast.errors.EngineError, match="AGEFAST_ENGINE must be"):
        tree.encrypt(tmp_path / "src", tmp_path / "enc", [x25519.Identity.generate().to_public()], workers=1)


def test_a_folder_that_cannot_be_listed_fails_alone(tmp_path, make_plaintext, monkeypatch):
    # One unreadable folder (or one past PATH_MAX) had ended the job before any file was done, with no summary.
    import agefast.tree.walk as walk

    identity = x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext)
    real = os.scandir

    def scandir(path):
        if os.fsencode(path).endswith(b"/a/b"):
            raise PermissionError(13, "Permission denied", path)
        return real(path)
    monkeypatch.setattr(walk.os, "scandir", scandir)
    summary = tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], workers=1)
    assert (summary.done, summary.failed) == (len(NAMES) - 2, 1)      # a/b/c/deep.dat, a/b/two chunks not done
    [failed] = [r for r in summary.records if r["status"] == "failed"]
    assert (failed["source"], failed["error"]) == ("a/b", "could not be listed: Permission denied")
    # An entry that cannot be looked at (a folder listed but not searchable, a path past PATH_MAX): alone too.
    class Unsearchable:
        def __init__(self, entry):
            self.name, self._entry = entry.name, entry

        def stat(self, follow_symlinks=True):
            if self.name == b"plain.txt":
                raise PermissionError(13, "Permission denied")
            return self._entry.stat(follow_symlinks=follow_symlinks)

    class Listing:
        def __init__(self, path):
            self._it = scandir(path)

        def __enter__(self):
            return [Unsearchable(e) for e in self._it.__enter__()]

        def __exit__(self, *exc):
            return self._it.__exit__(*exc)
    monkeypatch.setattr(walk.os, "scandir", Listing)
    summary = tree.encrypt(tmp_path / "src", tmp_path / "enc2", [identity.to_public()], workers=1)
    assert {r["source"]: r["error"] for r in summary.records if r["status"] == "failed"} == {
        "a/b": "could not be listed: Permission denied", "plain.txt": "could not be listed: Permission denied"}
    monkeypatch.setattr(walk.os, "scandir", lambda path: scandir(path) if os.fsencode(path) != os.fsencode(
        tmp_path / "src") else (_ for _ in ()).throw(PermissionError(13, "Permission denied", path)))
    with pytest.raises(PermissionError):     # the root itself: nothing to do
        tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], workers=1)


def test_the_command_quotes_a_name_that_could_write_report_lines_of_its_own(tmp_path):
    identity = x25519.Identity.generate()
    key = tmp_path / "key.txt"
    key.write_text(str(identity) + "\n")
    (tmp_path / "enc").mkdir()
    forged = b"x\nagefast-tree: verify: 40 done, 0 failed\x1b[1A.age"
    with open(os.path.join(os.fsencode(tmp_path / "enc"), forged), "wb") as f:
        f.write(b"not an age file")
    checked = _tree_command("verify", "-i", key, tmp_path / "enc")
    assert checked.returncode == 1
    lines = checked.stderr.decode().splitlines()
    assert len(lines) == 2 and lines[0].startswith('agefast-tree: "x\\nagefast-tree: verify: 40 done, 0 failed\\x1b[1A.age": ')


def test_a_run_after_a_line_cut_short_loses_none_of_its_own(tmp_path, make_plaintext):
    # The next run's first line was appended to the cut one and lost with it: an in-place re-key resumed then
    # failed the file it had done ("No matching keys found").
    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext, [b"a", b"b"])
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [old.to_public()], workers=1)
    manifest = tmp_path / "enc" / ".agefast-tree.jsonl"
    first, second = manifest.read_bytes().splitlines()
    manifest.write_bytes(first + b"\n" + second[:30])
    assert tree.rekey(tmp_path / "enc", [old], [new.to_public()], workers=1)[:2] == (2, 0)
    assert manifest.read_bytes().startswith(first + b"\n" + second[:30] + b"\n")
    assert tree.rekey(tmp_path / "enc", [old], [new.to_public()], workers=1)[:3] == (0, 0, 2)


def _killed_at_plain_txt(group):
    """A worker's task (agefast.tree.run._do_group, passed to the workers by name) that dies at plain.txt."""
    if group[0].path.endswith(b"plain.txt"):
        os._exit(9)
    return _killed_at_plain_txt.do_group(group)


def test_a_worker_killed_is_one_error_and_the_same_command_does_the_rest(tmp_path, make_plaintext, monkeypatch):
    # The OOM killer's kill -9 of a worker had ended the command in a BrokenProcessPool traceback.
    run = sys.modules["agefast.tree.run"]

    identity = x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext)
    monkeypatch.setattr(run, "GROUP_FILES", 1)
    _killed_at_plain_txt.do_group = run._do_group
    monkeypatch.setattr(run, "_do_group", _killed_at_plain_txt)
    with pytest.raises(OSError, match="a worker process ended abruptly"):
        tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], workers=2)
    monkeypatch.undo()
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], workers=2)
    assert tree.verify(tmp_path / "enc", [identity])[:2] == (len(NAMES), 0)


def test_a_line_a_full_disk_cuts_short_leaves_its_file_to_be_done_again(tmp_path, make_plaintext, monkeypatch):
    # A full disk ends a write short by its count, not by an error: the cut line was kept as written, the
    # next one glued onto it and both lost, and the same command then failed the file it had re-keyed.
    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext, [b"a", b"b"])
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [old.to_public()], workers=1)
    write = os.write
    cut = []

    def short(fd, data):
        if b'"source":"a.age"' in data and not cut:
            cut.append(data)
            return write(fd, data[:40])
        return write(fd, data)
    monkeypatch.setattr(os, "write", short)
    done, failed = tree.rekey(tmp_path / "enc", [old], [new.to_public()], workers=1)[:2]
    monkeypatch.undo()
    assert cut and (done, failed) == (1, 1)
    assert tree.rekey(tmp_path / "enc", [old], [new.to_public()], workers=1)[:3] == (1, 0, 1)
    for name in ("a", "b"):
        agefast.decrypt((tmp_path / "enc" / f"{name}.age").read_bytes(), [new])


def test_a_line_glued_onto_one_another_worker_left_cut_is_read(tmp_path):
    # A worker's short write (a full disk) cuts its line; the other workers, forked before, cannot know to
    # begin a line of their own, and the next whole line was lost with the cut one.
    from agefast.tree import manifest

    whole = manifest.line({"operation": "rekey", "source": "b.age", "status": "done"})
    cut = manifest.line({"operation": "rekey", "source": "a.age", "status": "done"})[:30]
    assert list(manifest.load(cut + whole)) == [b"b.age"]
    assert manifest.load(cut + b"\n") == {}


def test_a_passphrase_protected_ssh_key_is_asked_for_once(tmp_path, make_plaintext, ssh_keys, monkeypatch):
    # Each forked worker asked for it again, and a Dask cluster's workers could not be sent the key at all
    # (found by a review): it is unlocked once, before any worker starts, as an encrypted identity file is.
    from agefast import ssh
    from ssh_keys import PASSPHRASE, public_line

    path = ssh_keys["ed25519-protected"]
    asked = tmp_path / "asked"

    def passphrase():
        with open(asked, "a") as f:     # a forked worker's ask is counted too
            f.write("asked\n")
        return PASSPHRASE
    protected = ssh.EncryptedIdentity(path.read_bytes(), ssh.Recipient.from_str(public_line(path)), passphrase)
    contents = _make_tree(tmp_path / "src", make_plaintext)
    monkeypatch.setattr(sys.modules["agefast.tree.run"], "GROUP_FILES", 1)   # a task a file: both workers have some
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [protected.to_public()], workers=2)
    summary = tree.decrypt(tmp_path / "enc", tmp_path / "dec", [protected], workers=2)
    assert (summary.done, summary.failed) == (len(NAMES), 0)
    assert asked.read_text() == "asked\n"
    assert all(_read(tmp_path / "dec", name) == plain for name, plain in contents.items())


def test_a_key_that_does_not_pickle_is_refused_before_the_cluster_is_asked(tmp_path, make_plaintext, caplog):
    # distributed's serialisation had told it in every task, hundreds of lines of tracebacks (found by a review).
    # Told before anything is written: no manifest is made. A lambda, which distributed cloudpickles, goes.
    import threading

    need_module("distributed")

    class Here:
        """An identity that talks to something of this process, as a plugin's does."""

        def __init__(self):
            self._lock = threading.Lock()

        def unwrap(self, stanzas):
            return None

    class Client:
        def scatter(self, *args, **kwargs):
            raise AssertionError("the cluster was asked")

    identity = x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext)
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], workers=1)
    with pytest.raises(agefast.errors.IdentityError, match="an identity of type Here cannot be sent to the cluster"):
        tree.decrypt(tmp_path / "enc", tmp_path / "dec", [identity, Here()], client=Client())
    assert not (tmp_path / "dec").exists()
    assert caplog.records == []     # distributed's own pickling logs what it could not pickle: a key
    with_a_lambda = Here()
    del with_a_lambda._lock
    with_a_lambda.callback = lambda: None
    with pytest.raises(AssertionError, match="the cluster was asked"):     # past the check
        tree.verify(tmp_path / "enc", [identity, with_a_lambda], client=Client())


def test_a_manifest_gives_each_file_its_last_done_line():
    # Not the file's last line (a failure after it was done had hidden what is there), nor an earlier done line
    # (with whole-second times, a re-key back to recipients the file had in the same second would match it).
    from agefast.tree import manifest

    lines = [manifest.line({"operation": "rekey", "source": "a.age", "status": status, "sealed_for": sealed})
             for status, sealed in [("done", "B"), ("done", "A"), ("failed", None)]]
    assert manifest.load(b"".join(lines))[b"a.age"]["sealed_for"] == "A"


def test_a_manifest_this_account_may_only_append_to_is_appended_to(tmp_path, make_plaintext):
    # Looking for a line cut short must not ask to read it: force reads no manifest, and had run.
    identity = x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext, [b"a"])
    tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], workers=1)
    manifest = tmp_path / "enc" / ".agefast-tree.jsonl"
    manifest.chmod(0o200)
    try:
        if os.access(manifest, os.R_OK):
            pytest.skip("this account reads a file of mode 0200 (root)")
        assert tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], force=True,
                            workers=1)[:2] == (1, 0)
    finally:
        manifest.chmod(0o600)


def test_a_killed_run_then_run_again_does_each_file_once(tmp_path, make_plaintext):
    # Enough small files that the kill lands half way; the rerun must leave
    # every output whole and correct, no temporary file, and the outputs of
    # the first run untouched (their manifest lines say so).
    identity = x25519.Identity.generate()
    names = [f"d{i % 7}/f{i}".encode() for i in range(600)]
    contents = _make_tree(tmp_path / "src", make_plaintext, names)
    args = ("encrypt", "-r", identity.to_public(), tmp_path / "src", tmp_path / "enc")
    proc = subprocess.Popen([sys.executable, "-m", "agefast.cli.tree", *map(str, args)], stdin=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    manifest = tmp_path / "enc" / ".agefast-tree.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not manifest.exists() or manifest.stat().st_size < 20_000):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(0.5)     # the workers' ends (they die with the job's process)
    first = {}
    for line in manifest.read_bytes().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue    # the line the kill cut short
        path = os.path.join(os.fsencode(tmp_path / "enc"), os.fsencode(record["output"]))
        if os.path.exists(path) and os.stat(path).st_mtime_ns == record["output_mtime_ns"]:
            first[record["source"]] = record["output_mtime_ns"]
    assert 0 < len(first) < len(names)
    again = _tree_command(*args)
    assert again.returncode == 0, again.stderr
    summary = again.stderr.decode()
    assert f"{len(names) - len(first)} done, 0 failed, {len(first)} done before" in summary
    for name, plain in contents.items():
        path = os.path.join(os.fsencode(tmp_path / "enc"), name + b".age")
        assert agefast.decrypt(_read(tmp_path / "enc", name + b".age"), [identity]) == plain
        if os.fsdecode(name) in first:
            assert os.stat(path).st_mtime_ns == first[os.fsdecode(name)]
    assert [n for _, _, fs in os.walk(tmp_path / "enc") for n in fs if n.endswith(".partial")] == []


@contextlib.contextmanager
def dask_cluster():
    """A Dask LocalCluster of 2 worker processes (spawned: they inherit nothing of this process but its
    environment), one thread each, and a Client of it."""
    distributed = need_module("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        yield cluster, client


def test_a_dask_cluster_does_the_same_work(tmp_path, make_plaintext):
    # Worker processes get the job (the keys pickled) once; every operation
    # runs as tasks and gives what the local run gives.
    distributed = need_module("distributed")
    identity, new = x25519.Identity.generate(), x25519.Identity.generate()
    contents = _make_tree(tmp_path / "src", make_plaintext)
    with dask_cluster() as (cluster, client), distributed.get_task_stream(client) as tasks:
        assert tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], client=client).done == len(NAMES)
        assert tree.rekey(tmp_path / "enc", [identity], [new.to_public()], client=client).done == len(NAMES)
        assert tree.verify(tmp_path / "enc", [new], client=client).done == len(NAMES)
        summary = tree.decrypt(tmp_path / "enc", tmp_path / "dec", [new], client=client)
        workers = set(cluster.scheduler.workers)
    assert (summary.done, summary.failed) == (len(NAMES), 0)
    # one task per operation (the tree is one group of small files), each on a worker
    assert [t["key"].split("-")[0] for t in tasks.data] == ["_task"] * 4
    assert len(workers) == 2 and {t["worker"] for t in tasks.data} <= workers
    for name, plain in contents.items():
        assert _read(tmp_path / "dec", name) == plain
    manifest = [json.loads(line) for line in (tmp_path / "enc" / ".agefast-tree.jsonl").read_text().splitlines()]
    assert sorted(r["operation"] for r in manifest) == ["encrypt"] * len(NAMES) + ["rekey"] * len(NAMES)


def test_a_wrapped_store_is_the_store_it_wraps(tmp_path, make_plaintext):
    # simplecache:: (any fsspec wrapper) had made a store of its own protocol: DST inside SRC through it went
    # unrefused (its outputs inputs of the next run), and memory:// through it was written by forked workers
    # into their own copies (done, and nothing there).
    import fsspec

    from agefast.tree.run import GROUP_FILES

    identity = x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext)
    with pytest.raises(tree.RootsRefused, match="inside the source"):
        tree.encrypt(tmp_path / "src", f"simplecache::file://{tmp_path}/src/out", [identity.to_public()])
    fsspec.filesystem("memory").pipe({f"{tmp_path.name}/wrapped/{name}": b"x" for name in ("a", "b")})
    with pytest.raises(tree.RootsRefused, match="inside the source"):
        tree.encrypt(f"memory://{tmp_path.name}/wrapped", f"simplecache::memory://{tmp_path.name}/wrapped/out",
                     [identity.to_public()])
    (tmp_path / "many").mkdir()
    for i in range(3 * GROUP_FILES):    # groups enough for worker processes, were it not for memory://
        (tmp_path / "many" / f"{i:04d}").write_bytes(b"%d" % i)
    summary = tree.encrypt(tmp_path / "many", f"simplecache::memory://{tmp_path.name}/out", [identity.to_public()],
                           workers=2)
    assert (summary.done, summary.failed) == (3 * GROUP_FILES, 0)
    written = fsspec.filesystem("memory").find(f"/{tmp_path.name}/out")
    assert len([name for name in written if name.endswith(".age")]) == 3 * GROUP_FILES


def test_the_same_job_runs_again_on_one_client(tmp_path, make_plaintext):
    # The job was scattered under a key of its contents: run again while the last run's copy was being
    # released, its tasks failed ("lost dependencies"), a third of the reruns on two worker processes.
    identity = x25519.Identity.generate()
    _make_tree(tmp_path / "src", make_plaintext)
    with dask_cluster() as (_, client):
        for _ in range(15):
            summary = tree.encrypt(tmp_path / "src", tmp_path / "enc", [identity.to_public()], client=client,
                                   force=True)
            assert (summary.done, summary.failed) == (len(NAMES), 0)


def test_a_local_output_folder_is_made_once_when_missing_and_a_missing_input_is_not_retried(tmp_path, monkeypatch):
    from agefast.tree import store

    made = []

    class Os:
        """The os module as the store sees it, counting the folders it makes (the root's, by os.makedirs, not)."""

        def __getattr__(self, name):
            return getattr(os, name)

        def mkdir(self, path, *args, **kwargs):
            made.append(path)
            os.mkdir(path, *args, **kwargs)

    monkeypatch.setattr(store, "os", Os())
    local = store.Local(os.fsencode(tmp_path / "dst"))
    local.make()
    for name in (b"a/b/one", b"a/b/two", b"a/three"):
        local.put(name, name, lambda stat: None)
    assert made == [b"a", b"b"]
    assert (tmp_path / "dst/a/b/two").read_bytes() == b"a/b/two"

    calls = []

    def vanished(dst):
        # A source gone while its output is written: that file's error, not a folder to make.
        calls.append(dst)
        raise FileNotFoundError(2, "gone", "src/x")

    with pytest.raises(FileNotFoundError):
        local.put(b"c/x", vanished, lambda stat: None)
    with pytest.raises(FileNotFoundError):
        local.put(b"a/x", vanished, lambda stat: None)
    assert len(calls) == 2 and made[2:] == [b"c"]
    assert sorted(os.listdir(tmp_path / "dst/a")) == ["b", "three"]


def test_between_local_folders_only_small_files_are_read_whole_and_with_a_store_up_to_in_memory(tmp_path,
                                                                                                monkeypatch):
    # A file read whole has its output's SHA-256 in its record; a streamed one has none. Between local folders a
    # file past LOCAL_IN_MEMORY streams (the file driver is faster there than reading whole and hashing); where
    # an end is a store, a file up to IN_MEMORY is still read and written whole, one request each way.
    import hashlib

    import fsspec

    monkeypatch.setattr(tree.files, "LOCAL_IN_MEMORY", 1000)
    contents = {"small": os.urandom(1000), "larger": os.urandom(1001)}
    (tmp_path / "src").mkdir()
    for name, plain in contents.items():
        (tmp_path / "src" / name).write_bytes(plain)
    fsspec.filesystem("memory").pipe({f"{tmp_path.name}/src/{name}": plain for name, plain in contents.items()})
    identity = x25519.Identity.generate()
    for source, out, streamed in ((tmp_path / "src", tmp_path / "local", {"larger"}),
                                  (f"memory://{tmp_path.name}/src", tmp_path / "store", set())):
        summary = tree.encrypt(source, out, [identity.to_public()], workers=1)
        assert (summary.done, summary.failed) == (2, 0)
        for record in summary.records:
            sealed = (out / f"{record['source']}.age").read_bytes()
            assert agefast.decrypt(sealed, [identity]) == contents[record["source"]]
            assert record["sha256"] == (None if record["source"] in streamed else hashlib.sha256(sealed).hexdigest())


@pytest.mark.parametrize("workers", [1, 2])
def test_every_operation_on_a_local_tree_whose_files_stream(tmp_path, make_plaintext, monkeypatch, workers):
    # Between local folders a file past LOCAL_IN_MEMORY streams through the file driver (files of a few MiB
    # and up): here every file does, in the workers (2) and in this process (1). A damaged file that streams:
    # test_a_damaged_file_fails_alone_and_is_named_with_its_chunk.
    monkeypatch.setattr(tree.files, "LOCAL_IN_MEMORY", -1)
    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    contents = _make_tree(tmp_path / "src", make_plaintext)
    summary = tree.encrypt(tmp_path / "src", tmp_path / "enc", [old.to_public()], workers=workers)
    assert (summary.done, summary.failed) == (len(NAMES), 0)
    assert all(r["sha256"] is None for r in summary.records)
    assert tree.verify(tmp_path / "enc", [old], workers=workers).done == len(NAMES)
    summary = tree.rekey(tmp_path / "enc", [old], [new.to_public()], tmp_path / "copy", workers=workers)
    assert (summary.done, summary.failed) == (len(NAMES), 0)
    summary = tree.rekey(tmp_path / "enc", [old], [new.to_public()], workers=workers)      # in place
    assert (summary.done, summary.failed) == (len(NAMES), 0)
    for root in ("enc", "copy"):
        for name, plain in contents.items():
            assert agefast.decrypt(_read(tmp_path / root, name + b".age"), [new]) == plain
    summary = tree.decrypt(tmp_path / "enc", tmp_path / "dec", [new], workers=workers)
    assert (summary.done, summary.failed) == (len(NAMES), 0)
    for name, plain in contents.items():
        assert _read(tmp_path / "dec", name) == plain
