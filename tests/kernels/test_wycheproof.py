"""Project Wycheproof's ChaCha20-Poly1305 vectors (wycheproof.py) on cryptography, the reference, and on the
kernels this process runs: its build of the batch kernel and the single-message kernels of calls.py. Each
class's build in every form gets them in test_subprocess.py."""

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from agefast import kernels
from agefast.kernels import _common

from . import calls, wycheproof


@pytest.fixture(scope="module")
def vectors():
    wycheproof.require()
    return wycheproof.load()


def _label(what: str) -> str:
    return f"{kernels.isa()}/{_common._form()}, {what}"


def test_wycheproof_on_cryptography(vectors):
    valid = invalid = 0
    for v in vectors:
        if len(v.nonce) != 12:
            with pytest.raises(ValueError):
                ChaCha20Poly1305(v.key).encrypt(v.nonce, v.msg, v.aad)
            invalid += 1
            continue
        aead = ChaCha20Poly1305(v.key)
        assert (aead.encrypt(v.nonce, v.msg, v.aad) == v.ct + v.tag) == v.valid, v.tc
        if v.valid:
            assert aead.decrypt(v.nonce, v.ct + v.tag, v.aad) == v.msg, v.tc
            valid += 1
        else:
            with pytest.raises(InvalidTag):
                aead.decrypt(v.nonce, v.ct + v.tag, v.aad)
            invalid += 1
    print(f"\nwycheproof cryptography: {len(vectors)} vectors, {valid} valid, {invalid} invalid passed")
    assert valid + invalid == len(vectors)


def test_wycheproof_on_this_build(vectors):
    # one chunk, and the last chunk behind a whole one
    print("\n" + wycheproof.check(vectors, _common.STITCHED, _label("this process's build")))


def test_wycheproof_on_this_build_with_two_threads(vectors):
    # the last of three chunks, on the second thread's range: each thread's call carries the mask and the aad
    print("\n" + wycheproof.check(vectors, _common.STITCHED, _label("2 threads"), leads=(2,), threads=2))


def test_wycheproof_on_the_single_message_kernels(vectors):
    # _aead's two-pass _seal_one and _open_one, which the batch runs where the build is two-pass; they
    # take any nonce and validate nothing (the nonce sizes are _rfc8439's to refuse)
    checked = 0
    for v in vectors:
        if len(v.nonce) != 12:
            continue
        sealed = calls.aead_seal(v.key, v.nonce, v.msg, v.aad)
        assert (sealed == v.ct + v.tag) == v.valid and sealed[:len(v.msg)] == v.ct, v.tc
        assert calls.aead_open(v.key, v.nonce, v.ct + v.tag, v.aad) == (v.msg if v.valid else None), v.tc
        checked += 1
    print(f"\nwycheproof single-message kernels: {checked} vectors of 12-byte nonces passed")
