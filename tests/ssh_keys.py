"""SSH keys made with ssh-keygen, shared by the ssh tests and the CLI tests.

Generated once per session (RSA 4096 takes a moment), whichever test module
asks first.
"""

import subprocess

import pytest

PASSPHRASE = "correct horse"


def _keygen(directory, name, *args, passphrase=""):
    path = directory / name
    subprocess.run(["ssh-keygen", "-q", "-N", passphrase, "-C", f"{name}@test", "-f", path, *args],
                   check=True, capture_output=True)
    return path


_made: dict = {}


def _generate(tmp_path_factory) -> dict:
    if _made:
        return _made
    d = tmp_path_factory.mktemp("ssh-keys")
    _made.update({
        "ed25519": _keygen(d, "ed25519", "-t", "ed25519"),
        "rsa2048": _keygen(d, "rsa2048", "-t", "rsa", "-b", "2048"),
        "rsa3072": _keygen(d, "rsa3072", "-t", "rsa", "-b", "3072"),
        "rsa4096": _keygen(d, "rsa4096", "-t", "rsa", "-b", "4096"),
        "rsa2048-pem": _keygen(d, "rsa2048-pem", "-t", "rsa", "-b", "2048", "-m", "PEM"),
        "rsa2047": _keygen(d, "rsa2047", "-t", "rsa", "-b", "2047"),     # a modulus of 256 bytes, as age counts
        "rsa1024": _keygen(d, "rsa1024", "-t", "rsa", "-b", "1024"),
        "ecdsa": _keygen(d, "ecdsa", "-t", "ecdsa"),
        "ed25519-protected": _keygen(d, "ed25519-protected", "-t", "ed25519", passphrase=PASSPHRASE),
        "rsa-protected": _keygen(d, "rsa-protected", "-t", "rsa", "-b", "2048", passphrase=PASSPHRASE),
        "rsa1024-protected": _keygen(d, "rsa1024-protected", "-t", "rsa", "-b", "1024", passphrase=PASSPHRASE),
        "ecdsa-protected": _keygen(d, "ecdsa-protected", "-t", "ecdsa", passphrase=PASSPHRASE),
    })
    return _made


@pytest.fixture(scope="session")
def ssh_keys(tmp_path_factory, require_tool):
    """name -> private key path (the public key is beside it, + ".pub")."""
    require_tool("ssh-keygen")
    return _generate(tmp_path_factory)


def public_line(path) -> str:
    """The authorized_keys line of the key at `path`."""
    return path.with_name(path.name + ".pub").read_text()
