"""Every key type pickles, as a tree job sends its parsed keys to Dask workers (docs/tree.md), but those that ask
for a passphrase at first use."""

import copy
import io
import pickle

import pytest

import agefast
from agefast import keys, passphrase, pq, ssh, x25519
from ssh_keys import PASSPHRASE, public_line, ssh_keys  # noqa: F401 (a fixture)
from test_tag import HybridTagIdentity, P256TagIdentity


def _round_trip(key):
    copy = pickle.loads(pickle.dumps(key))
    assert type(copy) is type(key) and str(copy) == str(key)
    return copy


@pytest.mark.parametrize("module", [x25519, pq], ids=["x25519", "pq"])
def test_bech32_keys_pickle_as_their_bytes(module):
    # pq keys had failed: cryptography's key objects do not pickle.
    identity = module.Identity.generate()
    recipient = _round_trip(identity.to_public())
    copy = _round_trip(identity)
    assert copy == identity
    assert agefast.decrypt(agefast.encrypt(b"worker", [recipient]), [copy]) == b"worker"


@pytest.mark.parametrize("holder", [P256TagIdentity, HybridTagIdentity], ids=["p256tag", "mlkem768p256tag"])
def test_tag_recipients_pickle(holder):
    identity = holder()
    recipient = _round_trip(identity.recipient)
    assert agefast.decrypt(agefast.encrypt(b"worker", [recipient]), [identity]) == b"worker"


@pytest.mark.parametrize("name", ["ed25519", "rsa2048", "rsa2048-pem"])
def test_ssh_keys_pickle(ssh_keys, name):
    identity = ssh.Identity.from_buffer(ssh_keys[name].read_bytes())
    recipient = ssh.Recipient.from_str(public_line(ssh_keys[name]))
    copy = pickle.loads(pickle.dumps(identity))
    assert type(copy) is ssh.Identity and repr(copy) == repr(identity)
    sealed = agefast.encrypt(b"worker", [_round_trip(recipient)])
    assert agefast.decrypt(sealed, [copy]) == b"worker"


@pytest.mark.parametrize("make", [
    lambda key: agefast.encryptor(io.BytesIO(), [key.to_public()]),
    lambda key: agefast.decryptor(io.BytesIO(agefast.encrypt(b"x", [key.to_public()])), [key]),
    lambda key: agefast.EncryptingReader(io.BytesIO(b"x"), [key.to_public()]),
], ids=["encryptor", "decryptor", "EncryptingReader"])
@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, pickle.dumps], ids=["copy", "deepcopy", "pickle"])
def test_streams_are_neither_pickled_nor_copied(make, how):
    # A copy had shared its original's payload: the copy closed sealed the final chunk, the original went on
    # writing and closed without an error, and the file did not decrypt.
    stream = make(x25519.Identity.generate())
    with pytest.raises(TypeError, match=f"cannot pickle or copy {type(stream).__name__!r} object"):
        how(stream)
    stream.close()


def _passphrase(*prompt):
    return PASSPHRASE


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, pickle.dumps], ids=["copy", "deepcopy", "pickle"])
def test_passphrase_protected_keys_are_neither_pickled_nor_copied(ssh_keys, how):
    # An SSH key that asks for its passphrase at first use pickled, with a callback pickle could name, and once
    # used its pickle held the key decrypted, an unencrypted PEM (found by a probe of the API): it stays in its
    # process, as docs/tree.md says, and so does an identity file encrypted to a passphrase.
    path = ssh_keys["ed25519-protected"]
    protected = ssh.EncryptedIdentity(path.read_bytes(), ssh.Recipient.from_str(public_line(path)), _passphrase)
    assert agefast.decrypt(agefast.encrypt(b"used", [protected.to_public()]), [protected]) == b"used"
    inner = x25519.Identity.generate()
    sealed_file = passphrase.encrypt(f"{inner}\n".encode(), PASSPHRASE)
    [identity_file] = keys.load_identities(sealed_file, passphrase=_passphrase)
    assert agefast.decrypt(agefast.encrypt(b"used", [inner.to_public()]), [identity_file]) == b"used"
    for key in (protected, identity_file):
        with pytest.raises(TypeError, match=f"cannot pickle or copy {type(key).__name__!r} object"):
            how(key)
