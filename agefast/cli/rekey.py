"""The agefast-rekey command: an age file under a new header, for new recipients.

    agefast-rekey [-i PATH | -j PLUGIN]... [-e] (-r RECIPIENT | -R PATH)... [-o OUTPUT] [INPUT]

The identities open INPUT as `agefast -d` takes them (a passphrase is asked
for without them), the recipients are taken as `agefast -e` takes them, and
OUTPUT follows agefast's rules, except that it may be INPUT. The work is
agefast.rekeying's.
"""

import sys

from agefast import _arguments, rekeying
from agefast.cli import age, goflag, key_flags, outcome, output
from agefast.cli.output import OutputRefused
from agefast.cli.terminal import is_terminal
from agefast._typing import Recipient
from agefast.cli.arguments import Arguments
from agefast.cli.outcome import UsageError

USAGE = """\
Usage:
    agefast-rekey [-i PATH | -j PLUGIN]... [-e] (-r RECIPIENT | -R PATH)... [-o OUTPUT] [INPUT]
    agefast-rekey [-i PATH | -j PLUGIN]... --passphrase [-o OUTPUT] [INPUT]

Options:
    -i, --identity PATH         Open INPUT with the identity file at PATH. Can be repeated.
    -j PLUGIN                   Open INPUT with the data-less plugin PLUGIN. Can be repeated.
    -e, --encrypt               Keep the -i and -j identities as recipients too.
    -r, --recipient RECIPIENT   Re-key to the specified RECIPIENT. Can be repeated.
    -R, --recipients-file PATH  Re-key to the recipients listed at PATH. Can be repeated.
    -p, --passphrase            Re-key to a passphrase.
    -o, --output OUTPUT         Write the result to the file at path OUTPUT.

agefast-rekey writes the age file INPUT again with a new header for exactly
the given recipients; only they can open the result. The payload is copied
byte for byte, not encrypted again, so even a large file takes about as long
as copying it. Without -i or -j, a passphrase-encrypted INPUT asks for its
passphrase. RECIPIENT and the files of -R are as for agefast -e, and -e
encrypts to the -i and -j identities as agefast -e -i does.

Only the header is checked (its MAC, with the file key the identities
recover); the payload is copied as it is, and a damaged one fails to
decrypt in OUTPUT as it did in INPUT. The output is armored if INPUT is.

INPUT defaults to standard input, and OUTPUT defaults to standard output.
OUTPUT may be INPUT: an existing OUTPUT is replaced only once the whole
result was written.

What it does not do: the file key stays the same. Anyone who could decrypt
INPUT before and kept its file key, or a copy of INPUT, still can. To take
someone's access away, decrypt the file and encrypt it anew.

Example:
    $ agefast-rekey -i key.txt -e -r age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p -o data.age data.age"""


def _flags() -> goflag.FlagSet:
    f = goflag.FlagSet()
    f.bool("version", "version")
    f.bool("encrypt", "e", "encrypt")
    f.bool("passphrase", "p", "passphrase")
    f.string("output", "o", "output")
    key_flags.define(f)
    return f


def _check_flags(args: Arguments) -> None:
    if args.encrypt and not args.identity_flags:
        raise UsageError("-e/--encrypt needs identities to encrypt to, from -i/--identity or -j")
    if not (args.recipients or args.recipients_files or args.encrypt or args.passphrase):
        raise UsageError("missing recipients", "did you forget to specify -r/--recipient, -R/--recipients-file, "
                                               "-e/--encrypt or -p/--passphrase?")
    # A passphrase must be the only recipient of a file, as in encryption.
    for given, flag in ((args.recipients, "-r/--recipient"), (args.recipients_files, "-R/--recipients-file"),
                        (args.encrypt, "-e/--encrypt")):
        if args.passphrase and given:
            raise UsageError(f"-p/--passphrase can't be combined with {flag}")
    if [*args.recipients_files, *args.identities, args.input or "-"].count("-") > 1:
        raise UsageError("standard input is used for multiple purposes")
    # OUTPUT may be INPUT (it is replaced only on success), but not a key file.
    output.refuse_output_onto_an_input(args.output, key_flags.key_files(args))


def _rekey(args: Arguments) -> None:
    # A bad -r or -R is told before anything is asked for or read.
    recipients: list[Recipient] = [] if args.passphrase else key_flags.listed_recipients(args)
    loaded = key_flags.load_identities(args)
    with age.open_input(args.input) as src:
        with key_flags.identities_required(args):
            opened = rekeying.open_file(src, key_flags.opening_identities(args, loaded))
        if args.passphrase:
            # The new passphrase is asked for once the old one, if any, opened INPUT.
            recipients = key_flags.listed_recipients(args)
        if args.encrypt:
            recipients += [key for identity in loaded for key in key_flags.public_keys(identity)]
        header = rekeying.new_header(opened, recipients)
        if args.output is None and not opened.armored and is_terminal(sys.stdout):
            raise OutputRefused("refusing to output binary to the terminal", 'force anyway with "-o -"')
        # Synced before it replaces a file: in place, the file it replaces is the only copy of the payload
        # (and so never written into, as agefast -o writes an OUTPUT whose folder takes no new file).
        with output.open_output(args.output, False, False, durable=True) as dst:
            # Standard output that is INPUT (`1<> INPUT`, `>> INPUT`) is refused before anything is written, as
            # agefast and rekey_io refuse it: the copy would write over the payload it reads (-o INPUT is not
            # INPUT's file: the result replaces it once whole).
            _arguments.distinct_files(src, dst)
            rekeying.write_file(opened, header, dst, durable=True)


def _run(argv: list[str]) -> int:
    parsed, status = goflag.parse_command(_flags(), argv, USAGE)
    if parsed is None:
        return status
    values, positional = parsed
    args = Arguments(values, positional)

    def work() -> None:
        if len(positional) > 1:
            raise outcome.too_many_inputs("agefast-rekey", argv, positional)
        _check_flags(args)
        _rekey(args)

    return outcome.report_failure("agefast-rekey", work)


def main(argv: list[str] | None = None) -> int:
    return outcome.run_cleaning_up(_run, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
