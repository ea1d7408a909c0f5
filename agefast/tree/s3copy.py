"""Re-keying an age file on S3 by server-side copy: only its header and first part cross the network.

A re-keyed file is the new header, then the old file's payload byte for
byte (agefast.rekeying). On S3 the payload need not come down and go back
up: a multipart upload's parts can be ranges of another object, copied by
the server (UploadPartCopy), and S3 allows that object to be the one the
upload will replace. Every part but the last must be at least 5 MiB, so the
first part, which holds the new header, is the new header and the first
bytes of the payload, read with a ranged GET; the rest of the payload is
copied. Nothing appears until the upload completes; on any error it is
aborted, and the object is as it was.

Every copy asks for the ETag the walk saw (x-amz-copy-source-if-match), so
an object written again since fails the file rather than splicing the
first part of one version onto the rest of another (moto's server ignores
the condition: that is AWS's documented behaviour, untested here). The
calls go through s3fs's own client (call_s3): its credentials, endpoint and
retries.
"""

import contextlib
from collections.abc import Callable
from typing import Any

PART_MIN = 5 * 1024 * 1024              # S3's smallest part but the last
# Copied parts: S3 allows up to 5 GiB; 1 GiB keeps a 5 TB object (S3's
# largest) within 10,000 parts with room to spare, and a failed part cheap.
COPY_PART = 1024 * 1024 * 1024
# The ranged GET that holds the header: the first part's payload, and room
# for the header (a longer one, from a long recipient list, costs a second GET).
HEADER_ROOM = 64 * 1024
# Files from this size go by copy; smaller ones are a first part and little else.
COPY_FROM = PART_MIN + HEADER_ROOM

# From the first bytes of an age file: the length of its header and the new
# header, or None where its payload can't be copied as it is (armored).
NewHeader = Callable[[bytes], tuple[int, bytes] | None]


def is_s3(fs: Any) -> bool:
    return "s3" in ((fs.protocol,) if isinstance(fs.protocol, str) else fs.protocol) and hasattr(fs, "call_s3")


def holds(fs: Any, key: str, size: int, start: bytes) -> bool:
    """Whether the object at `key`, asked again, is `size` bytes long and begins with `start`: after a write that
    failed, whether it was written all the same (its answer lost, botocore's retry failing against it)."""
    fs.invalidate_cache(key)
    try:
        return int(fs.info(key)["size"]) == size and bytes(fs.cat_file(key, start=0, end=len(start))) == start
    except OSError:
        return False


def rekey(fs: Any, source: str, target: str, size: int, etag: str | None, new_header: NewHeader) -> bool:
    """Write the age file at `source` (`size` bytes, ETag `etag`) re-keyed at `target`, by server-side copy;
    False, with nothing done, if its payload can't be copied as it is (new_header said so). In place, the
    completion fails where another writer replaced the object meanwhile (the caller tells which failed)."""
    bucket, key, _ = fs.split_path(source)
    target_bucket, target_key, _ = fs.split_path(target)
    head = bytes(fs.cat_file(source, start=0, end=min(size, COPY_FROM)))
    made = new_header(head)
    if made is None:
        return False
    old_length, header = made
    # The first part: the new header and enough payload to make it PART_MIN.
    first_end = min(size, old_length + max(0, PART_MIN - len(header)))
    if first_end > len(head):
        head += bytes(fs.cat_file(source, start=len(head), end=first_end))
    first = header + head[old_length:first_end]
    # In place, the new object replaces the one read only if no one replaced it meanwhile.
    replacing = etag if (bucket, key) == (target_bucket, target_key) else None
    upload = fs.call_s3("create_multipart_upload", Bucket=target_bucket, Key=target_key)["UploadId"]
    try:
        parts = [fs.call_s3("upload_part", Bucket=target_bucket, Key=target_key, UploadId=upload, PartNumber=1,
                            Body=first)["ETag"]]
        copied = {"Bucket": bucket, "Key": key}
        match = {} if etag is None else {"CopySourceIfMatch": etag}
        for start in range(first_end, size, COPY_PART):
            end = min(size, start + COPY_PART)
            out = fs.call_s3("upload_part_copy", Bucket=target_bucket, Key=target_key, UploadId=upload,
                             PartNumber=len(parts) + 1, CopySource=copied,
                             CopySourceRange=f"bytes={start}-{end - 1}", **match)
            parts.append(out["CopyPartResult"]["ETag"])
        try:
            fs.call_s3("complete_multipart_upload", Bucket=target_bucket, Key=target_key, UploadId=upload,
                       MultipartUpload={"Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(parts)]},
                       **({} if replacing is None else {"IfMatch": replacing}))
        except OSError:
            # A completion done but its answer lost is retried, and the retry fails: the upload is gone, or
            # in place its If-Match no longer holds. The object is then this upload's: the new header's.
            if not holds(fs, target, len(header) + size - old_length, header):
                raise
    except BaseException:
        # The error told is the first one; an abort that fails too leaves an
        # upload that S3's lifecycle rule for incomplete uploads removes.
        with contextlib.suppress(OSError):
            fs.call_s3("abort_multipart_upload", Bucket=target_bucket, Key=target_key, UploadId=upload)
        raise
    fs.invalidate_cache(target)
    return True
