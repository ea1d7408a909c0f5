"""The agefast command: age's command line over the agefast library.

Flags and their combinations follow the Go age tool, so scripts written for
`age` work with `agefast`. Every failure is reported as one line on stderr,
`agefast: error: ...`, with exit status 1.
"""

import argparse
import contextlib
import errno
import json
import os
import signal
import sys
import tempfile
import time

import agefast
from agefast import errors, keys
from agefast._progress import with_progress
from agefast._terminal import PluginPrompts, TerminalError, is_terminal, read_passphrase

USAGE = """\
agefast [--encrypt] (-r RECIPIENT | -R PATH | -i PATH)... [--armor] [-o OUTPUT] [INPUT]
       agefast [--encrypt] --passphrase [--armor] [-o OUTPUT] [INPUT]
       agefast --decrypt [-i PATH | -j PLUGIN]... [-o OUTPUT] [INPUT]"""

EPILOG = """\
INPUT defaults to standard input, and OUTPUT defaults to standard output.
If OUTPUT exists, it is replaced only once the whole result was written.
RECIPIENT is an age public key (age1..., age1pq1..., age1tag1..., a plugin's
age1NAME1...) or an SSH public key ("ssh-ed25519 AAAA...", "ssh-rsa AAAA...");
-R PATH is a file of them, one per line, with # comments (authorized_keys
files work). -i PATH is an identity file as written by agefast-keygen or
age-keygen, an SSH private key, or a passphrase-encrypted age file holding an
identity file; with -e it encrypts to the identity's public key. -j PLUGIN
decrypts with the plugin age-plugin-PLUGIN and no identity data.
PATH "-" reads standard input."""

_PLUGIN_PROMPTS = PluginPrompts()


class UsageError(Exception):
    """The command line asks for something that cannot be done."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are UsageErrors, reported like any other."""

    def error(self, message):
        # argparse would print the whole usage and exit 2; age-style tools
        # report one line and exit 1.
        raise UsageError(message)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="agefast", usage=USAGE, epilog=EPILOG,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-e", "--encrypt", action="store_true", help="encrypt the input (the default)")
    p.add_argument("-d", "--decrypt", action="store_true", help="decrypt the input")
    p.add_argument("-o", "--output", metavar="OUTPUT", help="write the result to OUTPUT")
    p.add_argument("-a", "--armor", action="store_true", help="encrypt to a PEM encoded format")
    p.add_argument("-p", "--passphrase", action="store_true", help="encrypt with a passphrase")
    p.add_argument("-r", "--recipient", dest="recipients", action="append", default=[],
                   metavar="RECIPIENT", help="encrypt to RECIPIENT; can be repeated")
    p.add_argument("-R", "--recipients-file", dest="recipients_files", action="append", default=[],
                   metavar="PATH", help="encrypt to the recipients listed at PATH; can be repeated")
    p.add_argument("-i", "--identity", dest="identities", action="append", default=[],
                   metavar="PATH", help="use the identity file at PATH; can be repeated")
    p.add_argument("-j", dest="plugins", action="append", default=[], metavar="PLUGIN",
                   help="decrypt using the data-less plugin PLUGIN; can be repeated")
    p.add_argument("--threads", type=_positive_int, metavar="N", default=1,
                   help="cores for the payload (default 1: one command does not earn back the"
                        " ~1 s it takes to load the multi-core engine; see docs/performance.md)")
    p.add_argument("--warm-up", action="store_true",
                   help="compile (or load from Numba's cache) the payload engine, say which, and exit")
    p.add_argument("input", nargs="?", metavar="INPUT", help="the file to read (default: standard input)")
    return p


def _check_flags(args) -> None:
    """Reject the flag combinations age rejects, with age's reasons."""
    readers_of_stdin = [*args.recipients_files, *args.identities, args.input or "-"].count("-")
    if readers_of_stdin > 1:
        raise UsageError("standard input can't be read for more than one of INPUT, -R and -i")
    if args.decrypt:
        if args.encrypt:
            raise UsageError("-e/--encrypt can't be used with -d/--decrypt")
        if args.armor:
            raise UsageError("-a/--armor can't be used with -d/--decrypt (armored files are detected automatically)")
        if args.passphrase:
            raise UsageError("-p/--passphrase can't be used with -d/--decrypt"
                             " (passphrase-encrypted files are detected automatically)")
        if args.recipients or args.recipients_files:
            raise UsageError("-r/--recipient and -R/--recipients-file can't be used with -d/--decrypt"
                             " (did you mean -i/--identity?)")
        return
    if args.plugins:
        raise UsageError("-j can only be used with -d/--decrypt")
    if args.identities and not args.encrypt:
        raise UsageError("-i/--identity can't be used in encryption mode unless -e/--encrypt is given"
                         " (did you forget -d/--decrypt?)")
    if args.passphrase:
        if args.recipients or args.recipients_files or args.identities:
            raise UsageError("-p/--passphrase can't be combined with -r/--recipient,"
                             " -R/--recipients-file or -i/--identity")
    elif not (args.recipients or args.recipients_files or args.identities):
        raise UsageError("missing recipients: did you forget -r/--recipient, -R/--recipients-file"
                         " or -p/--passphrase?")
    # "-o -" names stdout on purpose, which is how age lets a user force
    # binary output onto a terminal.
    if args.output is None and not args.armor and is_terminal(sys.stdout):
        raise UsageError('refusing to output binary to the terminal, did you mean to use -a?'
                         ' (force it with "-o -")')


def _read_bytes(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as f:
        return f.read()


def read_key_file(path: str, purpose: str) -> str:
    try:
        return _read_bytes(path).decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{purpose} {path}: not a UTF-8 text file") from None


def _ssh_public_key(path: str):
    """PATH.pub, which age reads for a protected SSH key in PEM form (no public key inside)."""
    public_path = path + ".pub"
    if path == "-" or not os.path.exists(public_path):
        return None
    try:
        return agefast.ssh.Recipient.from_str(read_key_file(public_path, "SSH public key"))
    except agefast.RecipientError as e:
        raise agefast.IdentityError(f"{public_path}: {e}") from None


def _load_identity_file(path: str) -> list:
    """Every identity in the file at `path`, in any of the forms age accepts.

    Native identity files, SSH private keys, and identity files encrypted
    with a passphrase (asked for at first use) all work, as with age.
    """
    try:
        return agefast.load_identities(_read_bytes(path), name=path, passphrase=read_passphrase,
                                       callbacks=_PLUGIN_PROMPTS, ssh_public_key=_ssh_public_key(path))
    except agefast.IdentityError as e:
        # Messages about the file as a whole already name it; line errors don't.
        if path in str(e):
            raise
        raise agefast.IdentityError(f"identity file {path}: {e}") from None


def _load_identities(paths, plugins) -> list:
    """The identities of -i files, then of -j plugins (which take no identity data)."""
    identities = [identity for path in paths for identity in _load_identity_file(path)]
    for name in plugins:
        try:
            default = agefast.plugin.Identity.default_for_plugin(name)
            identities.append(agefast.plugin.IdentityPluginV1(name, [default], _PLUGIN_PROMPTS))
        except (agefast.IdentityError, agefast.DecryptError) as e:
            raise UsageError(f"-j {name}: {e}") from None
    return identities


def _public_keys(identity) -> list:
    """The recipients -e -i encrypts to for one identity."""
    # An encrypted identity file stands for all the identities inside it.
    if isinstance(identity, keys.EncryptedIdentityFile):
        return identity.recipients()
    return [identity.to_public()]


def _load_recipients(args) -> list:
    if args.passphrase:
        return [agefast.passphrase.Recipient(_new_passphrase())]
    recipients = []
    for text in args.recipients:
        try:
            recipients.append(keys.parse_recipient(text, _PLUGIN_PROMPTS))
        except agefast.RecipientError as e:
            raise agefast.RecipientError(f"recipient {text!r}: {e}") from None
    for path in args.recipients_files:
        def warn(message, path=path):
            # As age does, keys of SSH types age can't use are skipped, so an
            # authorized_keys file with such keys still works.
            print(f"agefast: warning: recipients file {path}: {message}", file=sys.stderr)

        try:
            recipients += agefast.parse_recipients(read_key_file(path, "recipients file"), _PLUGIN_PROMPTS, warn=warn)
        except agefast.RecipientError as e:
            raise agefast.RecipientError(f"recipients file {path}: {e}") from None
    for identity in _load_identities(args.identities, []):
        recipients += _public_keys(identity)
    return recipients


def _new_passphrase() -> str:
    passphrase = read_passphrase("Enter passphrase: ")
    if not passphrase:
        # age would autogenerate one; we ask the user to choose instead.
        raise UsageError("empty passphrase; agefast does not generate passphrases, please type one")
    if read_passphrase("Confirm passphrase: ") != passphrase:
        raise UsageError("passphrases didn't match")
    return passphrase


@contextlib.contextmanager
def _open_input(path):
    if path is None or path == "-":
        yield sys.stdin.buffer
    else:
        with open(path, "rb") as f:
            yield f


def _creation_mode() -> int:
    """The mode a plain open() would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def go_quote(text: str) -> str:
    """`text` in double quotes with escapes, as Go's %q prints it in age's messages."""
    return json.dumps(text, ensure_ascii=False)


def _same_file(path: str, output: str, output_stat) -> bool:
    if os.path.abspath(path) == os.path.abspath(output):
        return True
    if output_stat is None:
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (output_stat.st_dev, output_stat.st_ino)


def _refuse_output_onto_an_input(args) -> None:
    """Refuse, before anything is read or written, an OUTPUT that is INPUT or a key file.

    Replacing it would destroy the data or the key needed to get it back
    (`-d -i key.txt -o key.txt` would leave only the plaintext). Paths are
    compared as age compares them, and also as files (device and inode), so
    a symlink or a hard link to an input is caught too.
    """
    if args.output is None or args.output == "-":
        return
    try:
        output_stat = os.stat(args.output)
    except OSError:
        output_stat = None
    inputs = [*args.identities, *args.recipients_files, args.input]
    for path in inputs:
        if path not in (None, "-") and _same_file(path, args.output, output_stat):
            raise UsageError(f"input and output file are the same: {go_quote(args.output)}")


def _replaced_mode(target: str) -> int:
    """The mode the result gets: an existing file's own, else a new file's under the umask."""
    try:
        return os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        return _creation_mode()


@contextlib.contextmanager
def _open_output(path):
    """stdout, or a temporary file next to `path` renamed over it on success.

    Writing through a temporary file means a failure half way (a corrupt
    chunk, a full disk) never leaves a truncated or unauthenticated file at
    `path`, and an existing file there survives until the new one is whole.
    A symlink at `path` is written through, as a plain open() would: the
    file it points to is replaced, and the link stays.
    """
    if path is None or path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    target = os.path.realpath(path)
    directory, name = os.path.split(target)
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".partial")
    except OSError as e:
        # Name the file the user asked for, not our temporary one.
        raise type(e)(e.errno, e.strerror, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.chmod(tmp, _replaced_mode(target))
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


@contextlib.contextmanager
def _progress(src):
    """`src`, counted by a progress bar on stderr for large inputs at a terminal."""
    reader, bar = with_progress(src)
    try:
        yield reader
    finally:
        if bar is not None:
            bar.close()


def _encrypt(args) -> None:
    recipients = _load_recipients(args)
    with _open_input(args.input) as src, _open_output(args.output) as dst, _progress(src) as reader:
        agefast.encrypt_io(reader, dst, recipients, armored=args.armor, threads=args.threads)


class _PassphrasePrompt:
    """An identity that asks for a passphrase only if the file has an scrypt stanza.

    This is how age decrypts passphrase-encrypted files without a -p flag on
    decryption: the user is prompted only when a passphrase could help.
    """

    def __init__(self):
        self.asked = False

    def unwrap(self, stanzas):
        # passphrase.STANZA_TYPE, spelled out: importing agefast.passphrase
        # (scrypt, and OpenSSL's backend with it) cost every decryption 10 ms.
        if not any(s.type == "scrypt" for s in stanzas):
            return None
        self.asked = True
        return agefast.passphrase.Identity(read_passphrase("Enter passphrase: ")).unwrap(stanzas)


def _decrypt(args) -> None:
    prompt = _PassphrasePrompt()
    identities = [prompt, *_load_identities(args.identities, args.plugins)]
    with _open_input(args.input) as src, _open_output(args.output) as dst, _progress(src) as reader:
        try:
            agefast.decrypt_io(reader, dst, identities, threads=args.threads)
        except errors.NoIdentityMatchError:
            if prompt.asked:
                raise UsageError("incorrect passphrase") from None
            if not (args.identities or args.plugins):
                raise UsageError("the file is not passphrase-encrypted: did you forget -i/--identity?") from None
            raise


# What to put before the library's message, most specific class first. The
# library's messages already say what failed; a prefix is added only where
# the message alone would not say which part of the file was bad.
_PREFIXES = (
    (errors.HeaderMACError, ""),
    (errors.NoIdentityMatchError, ""),
    (errors.ArmorError, ""),
    (errors.HeaderError, "invalid header: "),
    (errors.PayloadError, "invalid payload: "),
    (agefast.DecryptError, "decryption failed: "),
    (agefast.EncryptError, "encryption failed: "),
)


def describe(exc: Exception) -> str:
    """One line for the user about `exc`."""
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return where + (exc.strerror or str(exc))
    prefix = next((p for cls, p in _PREFIXES if isinstance(exc, cls)), "")
    return prefix + str(exc)


def _warm_up() -> None:
    """Pay the engine's one-time compile now rather than in the first large job."""
    start = time.perf_counter()
    from agefast import kernels

    kernels.warm_up()
    print(f"agefast: payload engine ready ({kernels.isa()}) in {time.perf_counter() - start:.2f} s",
          file=sys.stderr)


class _Terminated(BaseException):
    """SIGTERM or SIGHUP arrived; raised in the main thread so cleanups run."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum, frame):
    raise _Terminated(signum)


@contextlib.contextmanager
def _cleanup_on_termination():
    """Turn SIGTERM and SIGHUP into _Terminated while the command runs.

    Their default action kills the process at once, leaving a temporary
    output file behind; as an exception they unwind through _open_output,
    which removes it, as Ctrl-C (KeyboardInterrupt) already does. A signal
    the caller chose to ignore (nohup) stays ignored.
    """
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(signum) == signal.SIG_DFL:
                previous[signum] = signal.signal(signum, _raise_terminated)
        except ValueError:
            break  # not the main thread: signals can't be handled here
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv=None) -> int:
    try:
        with _cleanup_on_termination():
            return _run(argv)
    except _Terminated as e:
        # Cleaned up; now die of the signal, so the caller sees what happened.
        signal.signal(e.signum, signal.SIG_DFL)
        os.kill(os.getpid(), e.signum)
        raise SystemExit(128 + e.signum) from None


def _run(argv) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.warm_up:
            _warm_up()
            return 0
        _check_flags(args)
        _refuse_output_onto_an_input(args)
        if args.decrypt:
            _decrypt(args)
        else:
            _encrypt(args)
        return 0
    except (UsageError, TerminalError, errors.AgeError, OSError) as e:
        message = describe(e)
    except KeyboardInterrupt:
        message = "interrupted"
    print(f"agefast: error: {message}", file=sys.stderr)
    return 1
