"""agefast.tree and agefast-tree over fsspec stores: S3 (moto's server on loopback), a prefix encrypted, re-keyed
in place by server-side copy and decrypted back, here and on a Dask cluster, a failed upload leaving nothing; any
other store (memory://); and a store whose library fails (no credentials, no connection): the job ended with one
line, or the file failed alone."""

import errno
import importlib
import io
import json
import os
import socket
import subprocess
import time

import pytest

import agefast
from agefast import rekeying, tree, x25519
from agefast.payload.rules import CHUNK_SIZE
from agefast.tree import files, manifest, s3copy
from required import need_module
from s3_server import s3_server
from test_tree import NAMES, _make_tree, _nonce_and_shares, _read, _tree_command, dask_cluster

MiB = 1024 * 1024
BIG = b"a/big"              # over s3copy.COPY_FROM once sealed: re-keyed by copy
MEDIUM = b"medium"          # over 5 MiB, under COPY_FROM once sealed: re-keyed through this machine


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        yield server


def _fs(s3, **options):
    """The store's fsspec filesystem, with `options` beside the server's (the instance tree.rekey gets, as fsspec
    keeps one per set of options)."""
    import fsspec

    return fsspec.filesystem("s3", **s3.options, **options)


def _copied(requests, key):
    """The number of parts of the upload that re-keyed object `key` (bucket/...) by server-side copy, having
    checked that of its bytes only its first part (PART_MIN: the new header and the payload's first bytes) and
    the completion's few hundred bytes of XML were sent."""
    sent = [r for r in requests if r.path == f"/{key}" and r.body]
    assert [r.body for r in sent[:-1]] == [s3copy.PART_MIN]
    assert "partNumber=1" in sent[0].query and "uploadId=" in sent[-1].query and sent[-1].body < 1000
    parts = [r.query.count("partNumber") for r in requests if r.path == f"/{key}" and r.method == "PUT"]
    assert set(parts) == {1}
    return len(parts)


def test_a_prefix_is_rekeyed_on_s3_by_server_side_copy_and_comes_back(tmp_path, make_plaintext, s3, monkeypatch,
                                                                      require_tool):
    # Copied parts of 5 MiB, so that the 12 MiB file's payload goes as two
    # copied ranges after its first part (the arithmetic of the ranges is
    # checked by decrypting it, here and by Go age).
    monkeypatch.setattr(s3copy, "COPY_PART", 5 * MiB)
    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    # moto's server refuses a key with a newline (S3 takes it): that name is left out.
    contents = _make_tree(tmp_path / "src", make_plaintext, [n for n in NAMES if b"\n" not in n])
    for i, (name, size) in enumerate([(BIG, 12 * MiB + 100), (MEDIUM, 5 * MiB)]):
        contents[name] = make_plaintext(size, 100 + i)
        (tmp_path / "src" / os.fsdecode(name)).write_bytes(contents[name])
    url = "s3://bucket/tree"
    # The command takes the URL, with s3fs's settings from the environment.
    encrypted = _tree_command("encrypt", "-r", old.to_public(), tmp_path / "src", url,
                              env={**os.environ, **s3.environment})
    # A name that is not UTF-8 can't be an S3 key: that file fails alone.
    assert encrypted.returncode == 1
    # Not printable as it is: quoted, as age quotes names (%q: a byte that is not UTF-8 as \xHH).
    assert encrypted.stderr.startswith(b'agefast-tree: "caf\\xe9-latin1": [Errno 84] the name is not UTF-8')
    del contents[b"caf\xe9-latin1"]
    assert tree.encrypt(tmp_path / "src", url, [old.to_public()], storage_options=s3.options)[:3] == (0, 1, len(contents))
    with pytest.raises(ValueError, match="inside the source"):
        tree.decrypt(url, url + "/out", [old], storage_options=s3.options)

    fs = _fs(s3)
    sizes = {name: fs.size(f"bucket/tree/{os.fsdecode(name)}.age") for name in contents}
    s3.requests.clear()
    summary = tree.rekey(url, [old], [new.to_public()], storage_options=s3.options)
    assert (summary.done, summary.failed) == (len(contents), 0)
    sent = {}
    for request in s3.requests:
        sent.setdefault(request.path, []).append(request)
    # The large file: a first part of exactly 5 MiB (the new header and the
    # payload's first bytes), then two parts copied by the server (no body),
    # then the completion's few hundred bytes of XML.
    assert _copied(s3.requests, f"bucket/tree/{os.fsdecode(BIG)}.age") == 3
    del sent[f"/bucket/tree/{os.fsdecode(BIG)}.age"]
    # Every other file went up whole, once; and nothing else but the manifest.
    manifest = sent.pop("/bucket/tree/.agefast-tree.jsonl")
    assert [r.body for r in manifest if r.method == "PUT"] == [fs.size("bucket/tree/.agefast-tree.jsonl")]
    assert {path: sum(r.body for r in requests) for path, requests in sent.items() if path.endswith(".age")} == \
        {f"/bucket/tree/{os.fsdecode(name)}.age": sizes[name] for name in contents if name != BIG}
    assert sum(r.body for requests in sent.values() for r in requests) == sum(sizes.values()) - sizes[BIG]
    records = {r["source"]: r for r in summary.records}
    assert records["a/big.age"]["output_stamp"].endswith('-3"')      # three parts

    sealed = fs.cat_file(f"bucket/tree/{os.fsdecode(BIG)}.age")
    assert len(sealed) == sizes[BIG] and agefast.decrypt(sealed, [new]) == contents[BIG]
    with pytest.raises(agefast.errors.NoIdentityMatchError):
        agefast.decrypt(sealed, [old])
    # Into another prefix of the same store: copied by the server too.
    s3.requests.clear()
    summary = tree.rekey(url, [new], [old.to_public()], "s3://bucket/copy", storage_options=s3.options)
    assert (summary.done, summary.failed) == (len(contents), 0)
    assert sum(r.body for r in s3.requests if r.path.endswith("big.age") and "partNumber" in r.query) == \
        s3copy.PART_MIN
    assert agefast.decrypt(fs.cat_file(f"bucket/copy/{os.fsdecode(BIG)}.age"), [old]) == contents[BIG]
    summary = tree.decrypt(url, tmp_path / "dec", [new], storage_options=s3.options)
    assert (summary.done, summary.failed) == (len(contents), 0)
    for name, plain in contents.items():
        assert _read(tmp_path / "dec", name) == plain

    (tmp_path / "big.age").write_bytes(sealed)
    (tmp_path / "key.txt").write_text(str(new) + "\n")
    require_tool("age")     # last: what comes before needs no tool
    opened = subprocess.run(["age", "-d", "-i", tmp_path / "key.txt", tmp_path / "big.age"], capture_output=True)
    assert opened.returncode == 0 and opened.stdout == contents[BIG], opened.stderr


def _shape(lines):
    """JSON lines as their shape: each record's fields and values, the values a run makes anew (stamps, SHA-256s)
    as their type; in order of operation and source."""
    anew = {"stamp", "output_stamp", "sha256"}
    records = [{k: type(v).__name__ if k in anew else v for k, v in json.loads(line).items()} for line in lines]
    return sorted(records, key=lambda r: (r["operation"], r["source"]))


def test_a_dask_cluster_does_the_same_on_s3(make_plaintext, s3, monkeypatch, tmp_path, require_tool):
    # All on S3, as docs/tree.md shows a cluster: a prefix encrypted into
    # another, re-keyed in place, decrypted into a third. The workers are
    # processes with no S3 setting in their environment: the endpoint and
    # credentials reach them only as the storage options, sent with the job,
    # as a user's would. The same operations run here (forked workers) give
    # the manifests and reports to match.
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    # A task per file (the groups are made here, by the client): both workers have some.
    monkeypatch.setattr(importlib.import_module("agefast.tree.run"), "GROUP_FILES", 1)
    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    contents = {"plain.txt": make_plaintext(1000), "with space.bin": make_plaintext(1001), "a/empty": b"",
                "a/b/two chunks": make_plaintext(CHUNK_SIZE + 100),
                os.fsdecode(BIG): make_plaintext(s3copy.COPY_FROM)}    # re-keyed by copy: a first part, a copied one
    fs = _fs(s3)
    fs.pipe({f"bucket/plain/{name}": plain for name, plain in contents.items()})

    def run(prefix, client):
        """Encrypt s3://bucket/plain into s3://bucket/PREFIX/enc, re-key that in place, decrypt it into .../dec:
        of each, the counts (done, failed), the report as its shape and the requests the store received; and
        the two manifests as their shapes."""
        url, report = f"s3://bucket/{prefix}", tmp_path / f"{prefix}.jsonl"
        given = {"report": report, "client": client, "storage_options": s3.options}
        runs = []
        for operation, args in ((tree.encrypt, ("s3://bucket/plain", url + "/enc", [old.to_public()])),
                                (tree.rekey, (url + "/enc", [old], [new.to_public()])),
                                (tree.decrypt, (url + "/enc", url + "/dec", [new]))):
            s3.requests.clear()
            counts = operation(*args, **given)[:2]
            runs.append((counts, _shape(report.read_text().splitlines()), list(s3.requests)))
        manifests = [_shape(fs.cat_file(f"bucket/{prefix}/{out}/.agefast-tree.jsonl").splitlines())
                     for out in ("enc", "dec")]
        return runs, manifests

    local_runs, local_manifests = run("local", None)
    distributed = need_module("distributed")
    with dask_cluster() as (cluster, client), distributed.get_task_stream(client) as tasks:
        runs, manifests = run("dask", client)
        workers = set(cluster.scheduler.workers)
    assert {t["worker"] for t in tasks.data} == workers and len(workers) == 2
    assert [counts for counts, _, _ in runs] == [(len(contents), 0)] * 3
    assert [r[:2] for r in runs] == [r[:2] for r in local_runs] and manifests == local_manifests
    assert _copied(runs[1][2], f"bucket/dask/enc/{os.fsdecode(BIG)}.age") == 2
    file_keys, nonces, shares = set(), set(), set()
    for name, plain in contents.items():
        assert fs.cat_file(f"bucket/dask/dec/{name}") == plain
        sealed = fs.cat_file(f"bucket/dask/enc/{name}.age")
        file_keys.add(rekeying.open_file(io.BytesIO(sealed), [new]).file_key)
        nonce, [share] = _nonce_and_shares(sealed)
        nonces.add(nonce)
        shares.add(share)
    # Every file its own file key (re-keying kept them), payload nonce and share.
    assert len(file_keys) == len(nonces) == len(shares) == len(contents)

    require_tool("age")     # last: what comes before needs no tool
    (tmp_path / "old.txt").write_text(f"{old}\n")
    (tmp_path / "new.txt").write_text(f"{new}\n")
    for name, plain in contents.items():
        sealed = fs.cat_file(f"bucket/dask/enc/{name}.age")
        by_old, by_new = (subprocess.run(["age", "-d", "-i", tmp_path / key], input=sealed, capture_output=True)
                          for key in ("old.txt", "new.txt"))
        assert by_old.returncode == 1 and b"no identity matched" in by_old.stderr
        assert by_new.returncode == 0 and by_new.stdout == plain, by_new.stderr


def test_a_failed_upload_leaves_nothing(tmp_path, make_plaintext, s3, monkeypatch):
    # Every file streamed (the path of files over 32 MiB): the output's
    # upload is committed at the end, and
    # discarded when the file fails.
    monkeypatch.setattr(files, "IN_MEMORY", 0)
    identity = x25519.Identity.generate()
    contents = _make_tree(tmp_path / "src", make_plaintext, [b"plain.txt", b"a/b/two chunks"])
    contents[BIG] = make_plaintext(6 * MiB, 7)
    (tmp_path / "src" / os.fsdecode(BIG)).write_bytes(contents[BIG])
    url = "s3://bucket/streamed"
    summary = tree.encrypt(tmp_path / "src", url, [identity.to_public()], workers=1, storage_options=s3.options)
    assert (summary.done, summary.failed) == (3, 0)
    fs = _fs(s3)
    # A server-side copy that S3 refuses (parts under 5 MiB) is aborted, the object left as it was.
    monkeypatch.setattr(s3copy, "COPY_PART", MiB)
    before = fs.cat_file("bucket/streamed/a/big.age")
    summary = tree.rekey(url, [identity], [identity.to_public()], workers=1, storage_options=s3.options)
    assert [r["source"] for r in summary.records if r["status"] == "failed"] == ["a/big.age"]
    assert fs.cat_file("bucket/streamed/a/big.age") == before
    assert fs.call_s3("list_multipart_uploads", Bucket="bucket").get("Uploads", []) == []
    damaged = bytearray(fs.cat_file("bucket/streamed/a/b/two chunks.age"))
    damaged[-50] ^= 1
    fs.pipe_file("bucket/streamed/a/b/two chunks.age", bytes(damaged))
    summary = tree.decrypt(url, "s3://bucket/out", [identity], workers=1, storage_options=s3.options)
    assert [(r["source"], r.get("chunk")) for r in summary.records if r["status"] == "failed"] == \
        [("a/b/two chunks.age", 1)]
    assert fs.cat_file("bucket/out/a/big") == contents[BIG]
    assert fs.cat_file("bucket/out/plain.txt") == contents[b"plain.txt"]
    fs.invalidate_cache()
    assert not fs.exists("bucket/out/a/b/two chunks")
    assert fs.call_s3("list_multipart_uploads", Bucket="bucket").get("Uploads", []) == []


def test_a_name_s3fs_reads_as_another_objects_fails_alone(tmp_path, s3):
    # s3fs cuts a path at "?versionId=": the output of "report.txt.age?versionId=1" had been written over
    # report.txt's, and the restore gave back the planted file's contents, with no error.
    identity = x25519.Identity.generate()
    src = tmp_path / "src"
    src.mkdir()
    (src / "report.txt").write_bytes(b"the real report")
    (src / "report.txt.age?versionId=1").write_bytes(b"planted")
    url = "s3://bucket/versioned"
    summary = tree.encrypt(src, url, [identity.to_public()], workers=1, storage_options=s3.options)
    [failed] = [r for r in summary.records if r["status"] == "failed"]
    assert (summary.done, failed["source"]) == (1, "report.txt.age?versionId=1")
    assert "reads this name as another object's" in failed["error"]
    tree.decrypt(url, tmp_path / "back", [identity], workers=1, storage_options=s3.options)
    assert (tmp_path / "back" / "report.txt").read_bytes() == b"the real report"


def test_a_job_its_store_stops_still_tells_and_reports_what_it_did(tmp_path, make_plaintext, monkeypatch):
    # Credentials that expire mid-run: the manifest's rewrite fails, and the error was all the job told. An
    # in-place re-key's files done were then recorded nowhere; the report is where they are now.
    from agefast.tree import store

    monkeypatch.setattr(importlib.import_module("agefast.tree.run"), "GROUP_FILES", 1)
    monkeypatch.setattr(manifest.Rewriter, "REWRITE_AFTER", 0.0)
    rewrite, rewrites = manifest.Rewriter._rewrite, []

    def expiring(self):
        rewrites.append(1)
        if len(rewrites) > 2:
            raise store.StoreError(13, "The provided token has expired.", "memory://expiring")
        rewrite(self)
    monkeypatch.setattr(manifest.Rewriter, "_rewrite", expiring)
    _make_tree(tmp_path / "src", make_plaintext)
    with pytest.raises(store.StoreError, match="expired") as stopped:
        tree.encrypt(tmp_path / "src", f"memory://{tmp_path.name}/dst", [x25519.Identity.generate().to_public()],
                     workers=1, report=tmp_path / "report.jsonl")
    done = stopped.value.summary.done
    assert 0 < done < len(NAMES)
    reported = [json.loads(line) for line in (tmp_path / "report.jsonl").read_text().splitlines()]
    assert sum(r["status"] == "done" for r in reported) == done


def test_once_a_run_fails_its_workers_write_nothing_more(tmp_path, s3, monkeypatch):
    # The manifest's rewrite failing (an outage of the store) ended the run with an error, while the pool's
    # workers went on uploading every output left, after the caller had been told and had cleaned up.
    from agefast.tree import store

    monkeypatch.setattr(importlib.import_module("agefast.tree.run"), "GROUP_FILES", 4)
    monkeypatch.setattr(manifest.Rewriter, "REWRITE_AFTER", 0.0)
    monkeypatch.setattr(manifest.Rewriter, "_rewrite", lambda self: (_ for _ in ()).throw(
        store.StoreError(5, "the store went away", "s3://bucket/failing")))
    src = tmp_path / "src"
    src.mkdir()
    for n in range(80):
        (src / f"f{n:02}").write_bytes(b"x" * 1000)
    url = "s3://bucket/failing"
    with pytest.raises(store.StoreError, match="the store went away"):
        tree.encrypt(src, url, [x25519.Identity.generate().to_public()], workers=2, storage_options=s3.options)
    fs = _fs(s3)

    def written():
        fs.invalidate_cache()
        return len(fs.find("bucket/failing"))
    told = written()
    time.sleep(2)
    assert written() == told < 80


def _rekey_racing_a_writer(fs, key, url, path, monkeypatch, **options):
    """tree.rekey of the folder of `key` in place, while another writer replaces the object after it was read
    (path "in memory") or streamed ("streamed"); the record of its failure, and what the writer wrote."""
    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    fs.pipe_file(key, agefast.encrypt(b"version 1", [old.to_public()], armored=path == "streamed"))
    newer = agefast.encrypt(b"version 2", [old.to_public()])

    def replace():
        time.sleep(0.01)    # a stamp of its own, where a store's clock is coarse
        fs.pipe_file(key, newer)
    if path == "in memory":
        from agefast.tree import store

        read = store.Remote.read
        monkeypatch.setattr(store.Remote, "read", lambda self, p: (read(self, p), replace())[0])
    else:
        monkeypatch.setattr(files, "IN_MEMORY", 0)
        streamed = files._streamed
        monkeypatch.setattr(files, "_streamed",
                            lambda job, threads: lambda src, dst: (streamed(job, threads)(src, dst), replace()))
    summary = tree.rekey(url, [old], [new.to_public()], workers=1, **options)
    [failed] = [r for r in summary.records if r["status"] == "failed"]
    return failed, newer


@pytest.mark.parametrize("path", ["in memory", "streamed"])
def test_an_object_written_while_it_is_rekeyed_in_place_is_left_as_written(path, s3, monkeypatch):
    # A writer replacing the object while it was re-keyed had its version dropped, the file reported done; a
    # local file in that race fails and is left. The put is conditional (If-Match); a streamed upload, whose
    # s3fs commit takes no condition, asks the ETag just before it.
    fs = _fs(s3)
    key = f"bucket/race-{path.replace(' ', '-')}/doc.age"
    failed, newer = _rekey_racing_a_writer(fs, key, f"s3://{key.rsplit('/', 1)[0]}", path, monkeypatch,
                                           storage_options=s3.options)
    assert "the object changed while it was re-keyed: left as it is" in failed["error"]
    fs.invalidate_cache()
    assert fs.cat_file(key) == newer
    assert fs.call_s3("list_multipart_uploads", Bucket="bucket").get("Uploads", []) == []


@pytest.mark.parametrize("path", ["in memory", "streamed"])
def test_an_object_written_while_it_is_rekeyed_in_place_on_any_store_is_left_as_written(path, monkeypatch):
    # As on S3 above, on a store with no conditional put (memory://): only S3's had been checked, and the
    # other writer's version was dropped, the file reported done. The stamp is asked just before the put.
    import fsspec

    fs = fsspec.filesystem("memory")
    key = f"/race-{path.replace(' ', '-')}/doc.age"
    failed, newer = _rekey_racing_a_writer(fs, key, f"memory://{key.rsplit('/', 1)[0]}", path, monkeypatch)
    assert "the object changed while it was re-keyed: left as it is" in failed["error"]
    assert fs.cat_file(key) == newer


def test_a_copy_in_place_completes_only_over_the_object_it_read(make_plaintext, s3, monkeypatch):
    # The copy's parts are conditional on the source (CopySourceIfMatch), but a writer coming after them was
    # overwritten by the completion. It asks If-Match now (moto does not enforce it there: the request is
    # checked).
    old = x25519.Identity.generate()
    fs = _fs(s3)
    key = "bucket/race-copied/doc.age"
    fs.pipe_file(key, agefast.encrypt(make_plaintext(6 * MiB), [old.to_public()]))
    etag = fs.info(key)["ETag"]
    asked = []
    call_s3 = fs.call_s3

    def calling(method, *args, **kwargs):
        if method == "complete_multipart_upload":
            asked.append(kwargs.get("IfMatch"))
        return call_s3(method, *args, **kwargs)
    monkeypatch.setattr(fs, "call_s3", calling)
    summary = tree.rekey("s3://bucket/race-copied", [old], [old.to_public()], workers=1, storage_options=s3.options)
    assert (summary.done, asked) == (1, [etag])


def test_a_copy_in_place_refused_by_its_condition_is_told_as_a_writer_s(make_plaintext, s3, monkeypatch):
    # The completion's If-Match fails where another writer replaced the object after the parts were copied
    # (moto does not enforce it: the failure is made here, as S3 would give it, once the writer has written).
    old = x25519.Identity.generate()
    fs = _fs(s3)
    key = "bucket/race-completed/doc.age"
    fs.pipe_file(key, agefast.encrypt(make_plaintext(6 * MiB), [old.to_public()]))
    newer = agefast.encrypt(b"version 2", [old.to_public()])
    call_s3 = fs.call_s3

    def calling(method, *args, **kwargs):
        if method == "complete_multipart_upload":
            call_s3("put_object", Bucket="bucket", Key="race-completed/doc.age", Body=newer)
            raise OSError(errno.EIO, "At least one of the pre-conditions you specified did not hold")
        return call_s3(method, *args, **kwargs)
    monkeypatch.setattr(fs, "call_s3", calling)
    summary = tree.rekey("s3://bucket/race-completed", [old], [old.to_public()], workers=1,
                         storage_options=s3.options)
    [failed] = [r for r in summary.records if r["status"] == "failed"]
    assert "the object changed while it was re-keyed: left as it is" in failed["error"]
    monkeypatch.undo()
    fs.invalidate_cache()
    assert fs.cat_file(key) == newer


@pytest.mark.parametrize("how", ["put", "copy", "stream"])
def test_a_rekey_in_place_whose_answer_was_lost_is_done(how, make_plaintext, s3, monkeypatch):
    # botocore retries a write whose answer was lost (a 500), and the retry fails against what the write made:
    # its If-Match no longer holds, or the upload is gone. The file was told as changed by another writer though
    # re-keyed, and the same command then failed it. The failure is made here, after the write, as S3 gives it.
    # "stream": an armored file (its payload re-encoded, not copied) over files.IN_MEMORY, uploaded in parts.
    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    parts = {"default_block_size": 5 * MiB} if how == "stream" else {}
    fs = _fs(s3, **parts)
    key = f"bucket/lost-{how}/doc.age"
    plaintext = make_plaintext(6 * MiB) if how != "put" else b"a small file"
    fs.pipe_file(key, agefast.encrypt(plaintext, [old.to_public()], armored=how == "stream"))
    pipe_file, call_s3 = fs.pipe_file, fs.call_s3

    def piping(path, data, **kwargs):
        pipe_file(path, data, **kwargs)
        if "IfMatch" in kwargs:     # the object's put, not the manifest's
            raise OSError(errno.EIO, "At least one of the pre-conditions you specified did not hold")

    def calling(method, *args, **kwargs):
        answer = call_s3(method, *args, **kwargs)
        if method == "complete_multipart_upload":
            raise FileNotFoundError(errno.ENOENT, "The specified upload does not exist")
        return answer
    if how == "put":
        monkeypatch.setattr(fs, "pipe_file", piping)
    else:
        monkeypatch.setattr(fs, "call_s3", calling)
    if how == "stream":
        monkeypatch.setattr(files, "IN_MEMORY", MiB)
    summary = tree.rekey(f"s3://bucket/lost-{how}", [old], [new.to_public()], workers=1,
                         storage_options={**s3.options, **parts})
    monkeypatch.undo()
    assert (summary.done, summary.failed) == (1, 0), summary.records
    fs.invalidate_cache()
    assert agefast.decrypt(fs.cat_file(key), [new]) == plaintext


def test_a_streamed_rekey_in_place_whose_commit_failed_is_failed(make_plaintext, s3, monkeypatch):
    # The other side of the lost answer: a completion that failed leaves the object as it was, and the object,
    # asked again, says so (it does not begin with the new header).
    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    parts = {"default_block_size": 5 * MiB}
    fs = _fs(s3, **parts)
    key = "bucket/commit-failed/doc.age"
    original = agefast.encrypt(make_plaintext(6 * MiB), [old.to_public()], armored=True)
    fs.pipe_file(key, original)
    call_s3 = fs.call_s3

    def calling(method, *args, **kwargs):
        if method == "complete_multipart_upload":
            raise OSError(errno.EIO, "We encountered an internal error. Please try again.")
        return call_s3(method, *args, **kwargs)
    monkeypatch.setattr(fs, "call_s3", calling)
    monkeypatch.setattr(files, "IN_MEMORY", MiB)
    summary = tree.rekey("s3://bucket/commit-failed", [old], [new.to_public()], workers=1,
                         storage_options={**s3.options, **parts})
    monkeypatch.undo()
    assert (summary.done, summary.failed) == (0, 1), summary.records
    fs.invalidate_cache()
    assert fs.cat_file(key) == original


def test_a_rekey_in_place_killed_before_its_manifest_was_rewritten_is_resumed_with_the_new_identities_too(s3):
    # The killed run had re-keyed doc.age unrecorded: the same command failed it ever after ("no identity
    # matched"), with nothing to say why nor what to do.
    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    fs = _fs(s3)
    fs.pipe_file("bucket/resumed/doc.age", agefast.encrypt(b"doc", [new.to_public()]))     # re-keyed, unrecorded
    fs.pipe_file("bucket/resumed/other.age", agefast.encrypt(b"other", [old.to_public()]))
    url, options = "s3://bucket/resumed", s3.options
    summary = tree.rekey(url, [old], [new.to_public()], workers=1, storage_options=options)
    [failed] = [r for r in summary.records if r["status"] == "failed"]
    assert failed["source"] == "doc.age" and "give the new identities too (-i)" in failed["error"]
    summary = tree.rekey(url, [old, new], [new.to_public()], workers=1, storage_options=options)
    assert (summary.done, summary.failed, summary.skipped) == (1, 0, 1)
    fs.invalidate_cache()
    assert [agefast.decrypt(fs.cat_file(f"bucket/resumed/{n}.age"), [new]) for n in ("doc", "other")] == [b"doc",
                                                                                                        b"other"]


def test_folder_markers_are_not_files(tmp_path, s3):
    # The zero-byte "folder/" objects the S3 console makes had failed every run (an empty name).
    fs = _fs(s3)
    for key, data in (("bucket/marked/", b""), ("bucket/marked/2024/", b""), ("bucket/marked/2024/a.txt", b"a")):
        fs.pipe_file(key, data)
    identity = x25519.Identity.generate()
    summary = tree.encrypt("s3://bucket/marked", tmp_path / "enc", [identity.to_public()], workers=1,
                           storage_options=s3.options)
    assert (summary.done, summary.failed) == (1, 0), summary.records
    assert agefast.decrypt((tmp_path / "enc" / "2024" / "a.txt.age").read_bytes(), [identity]) == b"a"


def test_any_fsspec_store_takes_a_tree_and_keeps_its_manifest(tmp_path, make_plaintext, monkeypatch):
    # memory:// has no server-side copy: re-keying downloads and uploads.
    # Its files live in this process, so one worker. The manifest object is
    # rewritten as groups end (here every group, one file each) and at the end.
    import fsspec.implementations.memory as memory

    written = []
    pipe_file = memory.MemoryFileSystem.pipe_file
    monkeypatch.setattr(memory.MemoryFileSystem, "pipe_file",
                        lambda fs, path, *args, **kwargs: (written.append(path), pipe_file(fs, path, *args, **kwargs)))
    monkeypatch.setattr(manifest.Rewriter, "REWRITE_AFTER", 0.0)
    monkeypatch.setattr(manifest.Rewriter, "WAIT_PER_UPLOAD", 0.0)
    monkeypatch.setattr(importlib.import_module("agefast.tree.run"), "GROUP_FILES", 1)    # the module, not tree.run
    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    contents = _make_tree(tmp_path / "src", make_plaintext)
    url = f"memory://{tmp_path.name}/enc"
    summary = tree.encrypt(tmp_path / "src", url, [old.to_public()], workers=1)
    assert (summary.done, summary.failed) == (len(NAMES) - 1, 1)       # the name that is not UTF-8
    assert sum(path.endswith("/.agefast-tree.jsonl") for path in written) == len(NAMES) + 1
    assert tree.encrypt(tmp_path / "src", url, [old.to_public()], workers=1)[:3] == (0, 1, len(NAMES) - 1)
    assert tree.rekey(url, [old], [new.to_public()], workers=1)[:2] == (len(NAMES) - 1, 0)
    assert tree.decrypt(url, tmp_path / "dec", [new], workers=1)[:2] == (len(NAMES) - 1, 0)
    for name, plain in contents.items():
        if name != b"caf\xe9-latin1":
            assert _read(tmp_path / "dec", name) == plain


def _without_credentials(tmp_path, **settings):
    """This environment without any AWS setting, botocore's files and instance metadata out of reach, and
    `settings`: no credentials unless they are given, and each request tried once."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none"),
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1", **settings}


def _closed_port():
    """A port of the loopback that nothing listens on: a connection to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("failure", ["no credentials", "refused"])
def test_a_store_that_fails_ends_the_command_with_one_line(tmp_path, make_plaintext, failure):
    # Botocore's own errors, which s3fs passes through untranslated: no
    # credentials (reading the source), no connection (writing the destination).
    need_module("s3fs")
    _make_tree(tmp_path / "src", make_plaintext, [b"f"])
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    if failure == "no credentials":
        env = _without_credentials(tmp_path, AWS_ENDPOINT_URL=endpoint)
        src, dst, said = "s3://bucket/x", tmp_path / "out", "NoCredentialsError: Unable to locate credentials"
    else:
        env = _without_credentials(tmp_path, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="a",
                                   AWS_SECRET_ACCESS_KEY="b")
        src, dst, said = tmp_path / "src", "s3://bucket/x", f'EndpointConnectionError: Could not connect to the ' \
            f'endpoint URL: "{endpoint}/bucket/x/.agefast-tree.jsonl"'
    ended = _tree_command("encrypt", "-r", x25519.Identity.generate().to_public(), src, dst, env=env)
    assert ended.returncode == 1
    assert ended.stderr.decode() == f"agefast-tree: error: s3://bucket/x: {said}\n"
    assert not (tmp_path / "out").exists()


class Refused(Exception):
    """An error of a store's library's own, not an OSError."""


def test_a_store_failing_on_a_file_fails_that_file_alone(tmp_path, make_plaintext, monkeypatch):
    # Read whole (cat_file), and streamed (the file object's reads, inside
    # the payload engine): each file fails alone, its record saying why.
    import fsspec
    import fsspec.implementations.memory as memory

    monkeypatch.setattr(files, "IN_MEMORY", 1000)
    names = {"read whole": 1000, "streamed": 3 * CHUNK_SIZE, "fine": 1000, "a/fine too": 2 * CHUNK_SIZE}
    contents = {name: make_plaintext(size, i) for i, (name, size) in enumerate(names.items())}
    fsspec.filesystem("memory").pipe({f"{tmp_path.name}/src/{name}": plain for name, plain in contents.items()})
    cat_file, readinto = memory.MemoryFileSystem.cat_file, memory.MemoryFile.readinto

    def failing_cat_file(fs, path, *args, **kwargs):
        if path.endswith("/read whole"):
            raise Refused("the store refused")
        return cat_file(fs, path, *args, **kwargs)

    def failing_readinto(f, b):
        if f.path.endswith("/streamed") and f.tell() > 0:      # its first read done
            raise Refused("the store went away")
        return readinto(f, b)
    monkeypatch.setattr(memory.MemoryFileSystem, "cat_file", failing_cat_file)
    monkeypatch.setattr(memory.MemoryFile, "readinto", failing_readinto)
    identity = x25519.Identity.generate()
    summary = tree.encrypt(f"memory://{tmp_path.name}/src", tmp_path / "enc", [identity.to_public()], workers=1)
    store = f"memory:///{tmp_path.name}/src"
    assert {r["source"]: r.get("error") for r in summary.records if r["status"] == "failed"} == {
        "read whole": f"{store}: Refused: the store refused", "streamed": f"{store}: Refused: the store went away"}
    assert (summary.done, summary.failed) == (2, 2)
    for name in ("fine", "a/fine too"):
        assert agefast.decrypt(_read(tmp_path / "enc", os.fsencode(name) + b".age"), [identity]) == contents[name]
    assert sorted(os.listdir(tmp_path / "enc")) == [".agefast-tree.jsonl", "a", "fine.age"]


@pytest.mark.parametrize("kind", ["expired token", "blocking"])
def test_an_answer_of_the_store_that_names_no_file_is_told_with_the_store(kind, tmp_path, monkeypatch):
    # s3fs's PermissionError for a 403 ("The provided token has expired.") named nothing: with two stores, the
    # line did not say which. An OSError of another kind (BlockingIOError's third argument is a count) is told as
    # it came.
    import fsspec
    import fsspec.implementations.memory as memory
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    fsspec.filesystem("memory").pipe({f"{tmp_path.name}/src/{kind}": b"x"})
    store = f"memory:///{tmp_path.name}/src"
    if kind == "expired token":
        answer = {"Error": {"Code": "ExpiredToken", "Message": "The provided token has expired."}}
        told = translate_boto_error(ClientError(answer, "GetObject"))     # as s3fs makes it: from the message alone
        said = f"[Errno 13] The provided token has expired.: '{store}'"
    else:
        told, said = BlockingIOError(errno.EAGAIN, "try again"), f"[Errno {errno.EAGAIN}] try again"

    def failing(fs, path, *args, **kwargs):
        raise told
    monkeypatch.setattr(memory.MemoryFileSystem, "cat_file", failing)
    summary = tree.encrypt(f"memory://{tmp_path.name}/src", tmp_path / "enc", [x25519.Identity.generate().to_public()],
                           workers=1)
    [failed] = summary.records
    assert failed["error"] == said


def test_on_a_dask_cluster_a_store_failing_on_the_workers_fails_each_file(tmp_path, make_plaintext, s3,
                                                                          monkeypatch):
    # The workers start with no credentials in their environment; this
    # process, which lists and makes the roots, has them (after the workers
    # started). Each file fails alone, with the message a local run gives.
    for name, value in _without_credentials(tmp_path, AWS_ENDPOINT_URL=s3.endpoint).items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    _make_tree(tmp_path / "src", make_plaintext, [b"f", b"a/g"])
    with dask_cluster() as (cluster, client):
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        summary = tree.encrypt(tmp_path / "src", "s3://bucket/refused", [x25519.Identity.generate().to_public()],
                               client=client, storage_options={"client_kwargs": {"endpoint_url": s3.endpoint}})
    assert {r["source"]: r["error"] for r in summary.records} == dict.fromkeys(
        ["f", "a/g"], "s3://bucket/refused: NoCredentialsError: Unable to locate credentials")


@pytest.mark.parametrize("operation", ["encrypt", "decrypt"])
def test_a_key_with_an_empty_dot_or_dot_dot_part_fails_alone_and_writes_nothing_out_of_dst(tmp_path, operation):
    # An object's key is any text: "src/../../../x" had been written at DST/../../../x, anywhere this account
    # may write, by whoever could put an object in the bucket; "a//b" and "a/./b" beside "a/b" took its output.
    import fsspec

    identity = x25519.Identity.generate()
    suffix = ".age" if operation == "decrypt" else ""
    seal = (lambda plain: agefast.encrypt(plain, [identity.to_public()])) if suffix else (lambda plain: plain)
    escape = os.path.relpath(tmp_path / "escaped", tmp_path / "out" / "x")
    hostile = [f"{escape}{suffix}", f"a/../../escaped{suffix}", f"./b{suffix}", f"a//b{suffix}", f"a/./b{suffix}",
               f"a/b\0{suffix}"]     # the last had ended the run: ValueError, embedded null byte
    root = f"{tmp_path.name}-{operation}/src"
    fsspec.filesystem("memory").pipe({f"{root}/x/{key}": seal(key.encode()) for key in hostile}
                                     | {f"{root}/x/a/b{suffix}": seal(b"a/b")})
    run = getattr(tree, operation)
    summary = run(f"memory://{root}", tmp_path / "out", [identity] if suffix else [identity.to_public()], workers=1)
    failed = {r["source"]: r["error"] for r in summary.records if r["status"] == "failed"}
    assert sorted(failed) == sorted(f"x/{key}" for key in hostile) and summary.done == 1
    assert all("a name with an empty, '.' or '..' part, or a NUL, which no file of a tree has" in e
               for e in failed.values())
    assert sorted(os.listdir(tmp_path)) == ["out"]
    out = tmp_path / "out" / "x" / "a" / f"b{'' if suffix else '.age'}"
    assert (out.read_bytes() if suffix else agefast.decrypt(out.read_bytes(), [identity])) == b"a/b"


def test_a_tree_in_this_process_memory_is_worked_here_and_its_outputs_appear_whole(tmp_path, monkeypatch):
    # memory://'s files are this process' objects: forked workers had written into their copies (200 files
    # done, none there), and a failed decrypt had left its verified prefix under the output's name.
    import fsspec

    monkeypatch.setattr(files, "IN_MEMORY", 1000)      # the large file streams
    identity = x25519.Identity.generate()
    root = f"{tmp_path.name}-mem"
    plain = {f"f{i}": os.urandom(500) for i in range(6)} | {"big": os.urandom(3 * CHUNK_SIZE)}
    fs = fsspec.filesystem("memory")
    fs.pipe({f"{root}/src/{name}": data for name, data in plain.items()})
    assert tree.encrypt(f"memory://{root}/src", f"memory://{root}/enc", [identity.to_public()], workers=2).done == 7
    sealed = fs.cat_file(f"{root}/enc/big.age")
    fs.pipe_file(f"{root}/enc/big.age", sealed[:-100] + bytes(100))       # its last chunk damaged
    summary = tree.decrypt(f"memory://{root}/enc", f"memory://{root}/dec", [identity], workers=2)
    assert (summary.done, summary.failed) == (6, 1)
    assert sorted(p.rsplit("/", 1)[1] for p in fs.find(f"{root}/dec")) == sorted(
        [".agefast-tree.jsonl", *(f"f{i}" for i in range(6))])
    with pytest.raises(tree.RootsRefused, match="a cluster's workers cannot reach memory://"):
        tree.verify(f"memory://{root}/enc", [identity], client=object())
