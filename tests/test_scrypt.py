"""Passphrase (scrypt) wrap keys come from libsodium where it may be used,
from cryptography otherwise (FIPS mode, no PyNaCl, a libsodium built
without scrypt), with the same results."""

import pyrage
import pytest
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
from hypothesis import given, settings, strategies as st

import agefast
from agefast import passphrase
from agefast.recipients import scrypt, sodium


class _Unreachable:
    def __getattr__(self, name):
        raise AssertionError(f"libsodium's {name} was reached")


def _openssl(passphrase: bytes, salt: bytes, log_n: int) -> bytes:
    return Scrypt(b"age-encryption.org/v1/scrypt" + salt, 32, 1 << log_n, 8, 1).derive(passphrase)


@settings(max_examples=40)
@given(st.binary(max_size=80), st.binary(min_size=16, max_size=16), st.integers(1, 10))
def test_libsodium_wrap_keys_match_cryptographys(passphrase, salt, log_n):
    assert sodium.bindings() is not None
    assert scrypt._wrap_key(passphrase, salt, log_n) == _openssl(passphrase, salt, log_n)


def test_cryptography_derives_where_libsodium_has_no_scrypt(monkeypatch):
    minimal = type("Minimal", (_Unreachable,), {"has_crypto_pwhash_scryptsalsa208sha256": False})()
    monkeypatch.setattr(sodium, "_bindings", minimal)
    assert scrypt._wrap_key(b"pw", bytes(16), 4) == _openssl(b"pw", bytes(16), 4)


def test_a_scrypt_without_memory_is_a_memory_error(monkeypatch):
    class Refusing:
        has_crypto_pwhash_scryptsalsa208sha256 = True

        @staticmethod
        def crypto_pwhash_scryptsalsa208sha256_ll(*args, **kwargs):
            raise RuntimeError("Unexpected failure in key derivation")   # PyNaCl's words for ENOMEM

    monkeypatch.setattr(sodium, "_bindings", Refusing())
    with pytest.raises(MemoryError, match="work factor 30: it needs 1048576 MiB"):
        scrypt._wrap_key(b"pw", bytes(16), 30)


def test_passphrase_files_open_with_pyrage():
    sealed = agefast.encrypt(b"with libsodium's scrypt", [passphrase.Recipient("pw", work_factor=10)])
    assert pyrage.passphrase.decrypt(sealed, "pw") == b"with libsodium's scrypt"
    assert agefast.decrypt(sealed, [passphrase.Identity("pw")]) == b"with libsodium's scrypt"


@pytest.mark.parametrize("fips", [lambda: True, None], ids=["FIPS mode", "FIPS mode cannot be asked about"])
def test_no_libsodium_where_fips_mode_is_or_may_be_on(fips, monkeypatch):
    monkeypatch.setattr(sodium, "_is_fips_enabled", fips)
    monkeypatch.setattr(sodium, "_bindings", _Unreachable())
    assert sodium.bindings() is None
    assert scrypt._wrap_key(b"pw", bytes(16), 4) == _openssl(b"pw", bytes(16), 4)


def test_work_factors_are_bounded_both_ways():
    for bad in (0, 31, True, 2.0, "18"):
        with pytest.raises(ValueError, match="work_factor must be an integer from 1 to 30"):
            passphrase.Recipient("pw", work_factor=bad)
        with pytest.raises(ValueError, match="max_work_factor must be an integer from 1 to 30"):
            passphrase.Identity("pw", max_work_factor=bad)
    passphrase.Recipient("pw", work_factor=30)
    passphrase.Identity("pw", max_work_factor=1)


def test_one_passphrase_recipient_twice_is_refused_as_two(tmp_path):
    # One object (or a copy) given twice had shared its label and made two scrypt stanzas: a file that age,
    # pyrage and agefast refuse ("an scrypt recipient must be the only one"), and a rekey in place had replaced
    # the only copy with one. A new label at each wrap, as age's WrapWithLabels.
    twice = passphrase.Recipient("pw", work_factor=4)
    with pytest.raises(agefast.EncryptError, match="a passphrase must be the only recipient of a file"):
        agefast.encrypt(b"x", [twice, twice])
    key = agefast.x25519.Identity.generate()
    path = tmp_path / "only.age"
    path.write_bytes(agefast.encrypt(b"the only copy", [key.to_public()]))
    with pytest.raises(agefast.EncryptError, match="a passphrase must be the only recipient of a file"):
        agefast.rekey(path, path, [key], [twice, twice])
    assert agefast.decrypt(path.read_bytes(), [key]) == b"the only copy"


@pytest.mark.parametrize("empty", ["", b""])
def test_an_empty_passphrase_is_no_recipient(empty):
    # As age's NewScryptRecipient: no age command opens such a file (they refuse an empty passphrase).
    with pytest.raises(agefast.RecipientError, match="passphrase can't be empty"):
        passphrase.Recipient(empty)
    with pytest.raises(agefast.RecipientError, match="passphrase can't be empty"):
        passphrase.encrypt(b"x", empty)
