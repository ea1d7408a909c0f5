"""age plugins through the test plugin tests/plugins/age-plugin-agefasttest.

The plugin is put on PATH behind a shim that runs it with this interpreter.
Its keys are symmetric: the recipient and identity with the same Bech32 data
are a pair; data starting with "pin" makes it ask for the secret "1234".
"""

import os
import pathlib
import sys

import pyrage
import pytest

import agefast
from agefast.format import bech32
from agefast import keys, plugin

PLUGIN = pathlib.Path(__file__).parent / "plugins" / "age-plugin-agefasttest"


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    shim = tmp_path / "age-plugin-agefasttest"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{PLUGIN}" "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def recipient(data: bytes) -> str:
    return bech32.encode("age1agefasttest", data)


def identity(data: bytes) -> str:
    return bech32.encode("AGE-PLUGIN-AGEFASTTEST-", data)


class Callbacks:
    def __init__(self, secret="1234"):
        self.secret = secret
        self.seen = []

    def display_message(self, message):
        self.seen.append(message)

    def request_passphrase(self, description):
        self.seen.append(description)
        return self.secret


def _encrypt(lib, data, callbacks, plaintext=b"through a plugin"):
    recipients = [lib.plugin.Recipient.from_str(recipient(data))]
    return lib.encrypt(plaintext, [lib.plugin.RecipientPluginV1("agefasttest", recipients, [], callbacks)])


def _decrypt(lib, data, ciphertext, callbacks):
    identities = [lib.plugin.Identity.from_str(identity(data))]
    return lib.decrypt(ciphertext, [lib.plugin.IdentityPluginV1("agefasttest", identities, callbacks)])


@pytest.mark.parametrize("writer, reader", [(agefast, agefast), (agefast, pyrage), (pyrage, agefast)])
def test_round_trip(writer, reader, on_path):
    callbacks = Callbacks()
    encrypted = _encrypt(writer, b"key one", callbacks)
    assert _decrypt(reader, b"key one", encrypted, callbacks) == b"through a plugin"
    assert callbacks.seen[0] == "hello from recipient-v1" and "hello from identity-v1" in callbacks.seen


def test_secret_requests(on_path):
    callbacks = Callbacks()
    encrypted = _encrypt(agefast, b"pin key", callbacks)
    assert _decrypt(agefast, b"pin key", encrypted, callbacks) == b"through a plugin"
    assert callbacks.seen.count("enter the PIN for the test key") == 2
    with pytest.raises(agefast.EncryptError, match="agefasttest plugin: wrong PIN"):
        _encrypt(agefast, b"pin key", Callbacks(secret="0000"))
    # A callbacks object without request_passphrase is a refusal too.
    with pytest.raises(agefast.EncryptError, match="wrong PIN"):
        _encrypt(agefast, b"pin key", object())


@pytest.mark.parametrize("index", ["00", "+0", "-0"])
def test_a_file_index_is_read_as_go_reads_a_number(index, on_path):
    # age reads a recipient-stanza's and a file-key's index with strconv.Atoi.
    data = b"index:" + index.encode()
    assert _decrypt(agefast, data, _encrypt(agefast, data, Callbacks()), Callbacks()) == b"through a plugin"


@pytest.mark.parametrize("index, error", [("1", "unexpected file index '1'"), ("x", "invalid file index"),
                                          ("+-0", "invalid file index"), ("0x0", "invalid file index"),
                                          ("9" * 19, "invalid file index"),     # past int64, as Atoi refuses it
                                          ("0" * 30 + "1", r"unexpected file index '000000000000\.\.\.00000001'")])
def test_a_file_index_other_than_zero_is_refused(index, error, on_path):
    with pytest.raises(agefast.EncryptError, match=error):
        _encrypt(agefast, b"index:" + index.encode(), Callbacks())


def test_a_confirm_with_options_that_are_no_utf8_is_asked(on_path):
    # age passes the options' bytes on as Go strings; agefast as text, the bytes no UTF-8 replaced.
    class Asking(Callbacks):
        def request_public_string(self, description):
            return "me"

        def confirm(self, message, yes, no):
            self.seen.append((message, yes, no))
            return True

    callbacks = Asking()
    assert _decrypt(agefast, b"askbytes", _encrypt(agefast, b"askbytes", callbacks), callbacks) == b"through a plugin"
    assert ("carry on?", "go\ufffd", "st\ufffdop") in callbacks.seen


def test_no_match_and_file_key_errors(on_path):
    encrypted = _encrypt(agefast, b"key one", Callbacks())
    with pytest.raises(agefast.errors.NoIdentityMatchError):
        _decrypt(agefast, b"key two", encrypted, Callbacks())


def test_plugin_labels(on_path):
    """The labels a plugin asks for are checked against the other recipients', as age 1.3 does."""
    labelled = plugin.RecipientPluginV1("agefasttest", [plugin.Recipient.from_str(recipient(b"labels"))], [],
                                        Callbacks())
    pq_identity = agefast.pq.Identity.generate()
    assert agefast.decrypt(agefast.encrypt(b"pq", [labelled, pq_identity.to_public()]), [pq_identity]) == b"pq"
    with pytest.raises(agefast.EncryptError, match="incompatible recipients: .* post-quantum and classic"):
        agefast.encrypt(b"x", [labelled, agefast.x25519.Identity.generate().to_public()])
    # Another label, as age words it: this had blamed a passphrase there was not.
    only_me = plugin.RecipientPluginV1("agefasttest", [plugin.Recipient.from_str(recipient(b"label:only-me"))], [],
                                       Callbacks())
    with pytest.raises(agefast.EncryptError, match=r'^incompatible recipients: \["only-me"\] and \[\] can\'t be mixed$'):
        agefast.encrypt(b"x", [only_me, agefast.x25519.Identity.generate().to_public()])
    with pytest.raises(agefast.EncryptError, match="a passphrase must be the only recipient"):
        agefast.encrypt(b"x", [agefast.x25519.Identity.generate().to_public(), agefast.passphrase.Recipient("pw")])


def test_plugin_keys_in_files(on_path):
    [r] = keys.parse_recipients(f"# a plugin recipient\n{recipient(b'file key')}\n", Callbacks())
    [i] = keys.parse_identities(f"{identity(b'file key')}\n", Callbacks())
    assert agefast.decrypt(agefast.encrypt(b"via files", [r]), [i]) == b"via files"
    default = plugin.IdentityPluginV1("agefasttest", [plugin.Identity.default_for_plugin("agefasttest")], None)
    with pytest.raises(agefast.errors.NoIdentityMatchError):
        agefast.decrypt(agefast.encrypt(b"x", [r]), [default])


def test_missing_plugin(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    r = plugin.Recipient.from_str(recipient(b"k"))
    with pytest.raises(agefast.EncryptError, match="could not find age-plugin-agefasttest on the PATH"):
        plugin.RecipientPluginV1("agefasttest", [r], [], Callbacks())
    with pytest.raises(agefast.DecryptError, match="could not find age-plugin-agefasttest"):
        plugin.IdentityPluginV1("agefasttest", [], Callbacks())
    with pytest.raises(agefast.RecipientError, match="could not find"):
        keys.parse_recipient(recipient(b"k"))


def test_plugin_names_in_keys_are_lower_case_and_given_names_keep_their_case():
    # as age's and rage's parsers: a key's name is lower case; pyrage's default_for_plugin lower-cases
    assert plugin.Identity.from_str(identity(b"k")).plugin() == "agefasttest"
    assert plugin.Identity.default_for_plugin("AgefastTest").plugin() == "agefasttest"
    assert plugin.Recipient("AgefastTest", b"k").plugin() == "agefasttest"
    given = plugin.Identity("AgefastTest", b"")
    assert (given.plugin(), str(given)) == ("AgefastTest", bech32.encode("AGE-PLUGIN-AGEFASTTEST-", b""))


@pytest.mark.parametrize("name", ["../../bin/sh", "a/b", "", "x y", "evil~", "名前"])
def test_bad_plugin_names_are_refused(name, on_path):
    with pytest.raises(agefast.IdentityError, match="Invalid plugin name"):
        plugin.Identity.default_for_plugin(name)
    with pytest.raises(agefast.EncryptError, match="Invalid plugin name"):
        plugin.RecipientPluginV1(name, [], [], Callbacks())
    with pytest.raises(agefast.DecryptError, match="Invalid plugin name"):
        plugin.IdentityPluginV1(name, [], Callbacks())


@pytest.mark.parametrize("hrp", ["age1../../bin/sh", "age1a/b"])
def test_bad_plugin_names_in_keys(hrp):
    # Bech32 allows these characters in the prefix; the plugin name must not.
    with pytest.raises(agefast.RecipientError, match="Invalid plugin name"):
        plugin.Recipient.from_str(bech32.encode(hrp, b"data"))
    with pytest.raises(agefast.IdentityError, match="Invalid plugin name"):
        plugin.Identity.from_str(bech32.encode(f"AGE-PLUGIN-{hrp[4:].upper()}-", b"data"))


def test_keys_of_another_plugin_are_left_out_as_pyrage_leaves_them(on_path):
    # One list of every plugin key, given to each plugin (age's Rust RecipientPluginV1 filters it): the
    # agefasttest plugin makes one stanza a key it is handed, so the other key would show as a second.
    other = plugin.Recipient.from_str(bech32.encode("age1other", b"k"))
    mine = plugin.Recipient.from_str(recipient(b"key one"))
    encrypted = agefast.encrypt(b"x", [plugin.RecipientPluginV1("agefasttest", [other, mine], [], Callbacks())])
    header = encrypted[:encrypted.index(b"\n---")]
    assert header.count(b"\n-> ") == 1 and b"\n-> agefasttest " in header
    identities = [plugin.Identity.from_str(identity(b"key one")), plugin.Identity.default_for_plugin("yubikey")]
    assert agefast.decrypt(encrypted, [plugin.IdentityPluginV1("agefasttest", identities, Callbacks())]) == b"x"
    with pytest.raises(agefast.EncryptError, match="no recipients or identities for the agefasttest plugin"):
        agefast.encrypt(b"x", [plugin.RecipientPluginV1("agefasttest", [other], [], Callbacks())])


@pytest.mark.parametrize("text, error, fragment", [
    ("invalid~~~", agefast.RecipientError, "invalid Bech32 encoding"),
    (bech32.encode("AGE-PLUGIN-X-", b"k"), agefast.RecipientError, "not a plugin recipient"),
    (bech32.encode("age1x", b"k"), agefast.IdentityError, "not a plugin identity"),
])
def test_malformed_plugin_keys(text, error, fragment):
    cls = plugin.Recipient if error is agefast.RecipientError else plugin.Identity
    with pytest.raises(error, match=fragment):
        cls.from_str(text)


def _shim(folder):
    folder.mkdir(exist_ok=True)
    shim = folder / "age-plugin-agefasttest"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{PLUGIN}" "$@"\n')
    shim.chmod(0o755)
    return shim


def test_a_plugin_another_account_could_have_put_or_changed_is_not_run(tmp_path, monkeypatch):
    # Nothing from a place another account can write is run: not a plugin found through a relative PATH entry
    # (the current folder, as Go's exec.LookPath refuses it), nor one in or through a folder others may write,
    # nor one others may write itself.
    places = {}
    places["a relative PATH entry"] = (".", _shim(tmp_path / "cwd").parent, "is found in the current folder")
    open_folder = tmp_path / "open"
    _shim(open_folder)
    open_folder.chmod(0o777)
    places["a folder others may write"] = (str(open_folder), None, "is writable by group or others")
    writable = _shim(tmp_path / "plain")
    writable.chmod(0o757)
    places["a program others may write"] = (str(writable.parent), None, "is writable by group or others")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "age-plugin-agefasttest").symlink_to(open_folder / "age-plugin-agefasttest")
    places["a link into a folder others may write"] = (str(linked), None, "is writable by group or others")
    # The PATH entry a link in a folder others may write: they could point it at their own folder between the
    # check and the run (a probe did, and its plugin ran); likewise a link on the way to the program.
    mine = _shim(tmp_path / "mine").parent
    (open_folder / "plugins").symlink_to(mine)
    places["a PATH entry through a folder others may write"] = (str(open_folder / "plugins"), None,
                                                                 "is writable by group or others")
    chained = tmp_path / "chained"
    chained.mkdir()
    (open_folder / "hop").symlink_to(mine / "age-plugin-agefasttest")
    (chained / "age-plugin-agefasttest").symlink_to(open_folder / "hop")
    places["a chain of links through a folder others may write"] = (str(chained), None,
                                                                     "is writable by group or others")
    for what, (entry, cwd, error) in places.items():
        monkeypatch.setenv("PATH", f"{entry}{os.pathsep}{os.environ['PATH']}")
        if cwd is not None:
            monkeypatch.chdir(cwd)
        with pytest.raises(agefast.errors.EncryptError, match=f"age-plugin-agefasttest is not run: .*{error}"):
            _encrypt(agefast, b"plain data", Callbacks())
        monkeypatch.undo()
    # The same plugin from a folder of this user's alone runs.
    monkeypatch.setenv("PATH", f"{tmp_path / 'cwd'}{os.pathsep}{os.environ['PATH']}")
    assert _decrypt(agefast, b"plain data", _encrypt(agefast, b"plain data", Callbacks()), Callbacks()) == (
        b"through a plugin")


@pytest.mark.requires_root("a link of another account's")
def test_a_link_another_account_put_in_a_sticky_folder_is_not_followed(tmp_path, monkeypatch):
    # Anyone may add a name to a sticky folder (/tmp): a link another account put there chose which program of
    # this user's or root's ran as the plugin (/usr/bin/env, in the probe).
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    mine = _shim(tmp_path / "mine")
    (sticky / "age-plugin-agefasttest").symlink_to(mine)
    os.chown(sticky / "age-plugin-agefasttest", 65534, 65534, follow_symlinks=False)
    monkeypatch.setenv("PATH", f"{sticky}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(agefast.errors.EncryptError, match="is owned by uid 65534, in a folder others may write"):
        _encrypt(agefast, b"plain data", Callbacks())
    # A hard link another account made there has the program's owner, root's (where protected_hardlinks is off).
    os.unlink(sticky / "age-plugin-agefasttest")
    os.link(mine, sticky / "age-plugin-agefasttest")
    with pytest.raises(agefast.errors.EncryptError, match="is a hard link, in a folder others may write"):
        _encrypt(agefast, b"plain data", Callbacks())
    os.unlink(sticky / "age-plugin-agefasttest")
    (sticky / "age-plugin-agefasttest").symlink_to(mine)     # this user's own link runs
    assert _decrypt(agefast, b"plain data", _encrypt(agefast, b"plain data", Callbacks()), Callbacks()) == (
        b"through a plugin")


def test_what_a_plugin_writes_to_stderr_is_shown_only_with_agedebug(tmp_path, monkeypatch, capfd):
    # As age: a plugin talks to the user through the protocol, and its stderr (escape sequences, tracebacks)
    # reached the terminal.
    folder = tmp_path / "noisy"
    folder.mkdir()
    noisy = folder / "age-plugin-agefasttest"
    noisy.write_text(f'#!/bin/sh\necho "plugin noise \033[31m" >&2\nexec "{sys.executable}" "{PLUGIN}" "$@"\n')
    noisy.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    _encrypt(agefast, b"plain data", Callbacks())
    assert "plugin noise" not in capfd.readouterr().err
    monkeypatch.setenv("AGEDEBUG", "plugin")
    _encrypt(agefast, b"plain data", Callbacks())
    assert "plugin noise" in capfd.readouterr().err


@pytest.mark.parametrize("make", [
    lambda: plugin.RecipientPluginV1("agefasttest", [plugin.Identity.from_str(identity(b"k"))], [], Callbacks()),
    lambda: plugin.RecipientPluginV1("agefasttest", [], [plugin.Recipient.from_str(recipient(b"k"))], Callbacks()),
    lambda: plugin.IdentityPluginV1("agefasttest", [plugin.Recipient.from_str(recipient(b"k"))], Callbacks()),
], ids=["identity-as-recipient", "recipient-as-identity", "recipient-as-identity-v1"])
def test_a_key_of_the_other_kind_is_a_type_error_as_in_pyrage(make, on_path):
    # A plugin identity among the recipients had been sent to the plugin as a recipient: its secret, to wrap to.
    with pytest.raises(TypeError, match="object cannot be converted to"):
        make()


def test_a_plugin_that_sends_more_than_a_header_holds_is_stopped_as_it_sends(on_path):
    # Its stanzas had all been kept until it said done, and only then found too large for a header: a plugin
    # that never stops (here, stanzas of 1 MiB) took a GiB and more.
    flood = [plugin.Recipient.from_str(recipient(b"flood"))]
    with pytest.raises(agefast.EncryptError, match="more than a header holds"):
        agefast.encrypt(b"x", [plugin.RecipientPluginV1("agefasttest", flood, [], Callbacks())])


def test_an_unpickled_plugin_key_looks_for_its_program_again(tmp_path, monkeypatch):
    # A key pickled (agefast-tree sends them to Dask workers so) had kept the program found and checked where it
    # was made, and where it was unpickled ran what lay at that path, however others could change it there.
    import pickle

    folder = _shim(tmp_path / "plugins").parent
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    keys = [plugin.RecipientPluginV1("agefasttest", [plugin.Recipient.from_str(recipient(b"data"))], [], None),
            plugin.IdentityPluginV1("agefasttest", [plugin.Identity.from_str(identity(b"data"))], None)]
    sealed = agefast.encrypt(b"x", [keys[0]])
    pickled = pickle.dumps(keys)
    assert agefast.decrypt(sealed, [pickle.loads(pickled)[1]]) == b"x"
    folder.chmod(0o777)
    recipient_key, identity_key = pickle.loads(pickled)
    with pytest.raises(agefast.EncryptError, match="age-plugin-agefasttest is not run: .*writable by group"):
        agefast.encrypt(b"x", [recipient_key])
    with pytest.raises(agefast.DecryptError, match="age-plugin-agefasttest is not run: .*writable by group"):
        agefast.decrypt(sealed, [identity_key])


def test_a_plugin_finds_no_program_through_a_relative_path_entry(monkeypatch):
    # Its working directory is the temporary folder, which every account writes: an empty or "." entry of PATH
    # would find its interpreter (#!/usr/bin/env python3) or the commands it runs there.
    from agefast.recipients import plugin_protocol

    monkeypatch.setenv("PATH", os.pathsep.join(["/usr/local/bin", "", ".", "bin", "/usr/bin"]))
    assert plugin_protocol._environment()["PATH"] == os.pathsep.join(["/usr/local/bin", "/usr/bin"])
