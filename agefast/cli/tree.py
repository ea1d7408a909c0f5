"""The agefast-tree command: every file of a tree encrypted, decrypted, re-keyed or verified in one process.

The keys are taken as `agefast` takes them (the same -r, -R, -i and -j), and
parsed once; the work is agefast.tree's.
"""

import re
import sys
from typing import Any

from agefast import tree
from agefast.errors import go_quote
from agefast.io.writes import write_all
from agefast.cli import goflag, key_flags, outcome, output
from agefast.cli.arguments import Arguments
from agefast.cli.outcome import UsageError
from agefast.cli.terminal import is_terminal

USAGE = """\
Usage:
    agefast-tree encrypt (-r RECIPIENT | -R PATH)... [-a] [options] SRC DST
    agefast-tree decrypt (-i PATH | -j PLUGIN)... [options] SRC DST
    agefast-tree rekey (-i PATH | -j PLUGIN)... (-r RECIPIENT | -R PATH)... [options] SRC [DST]
    agefast-tree verify (-i PATH | -j PLUGIN)... [options] SRC

Options:
    -r, --recipient RECIPIENT   Encrypt (or re-key) to RECIPIENT. Can be repeated.
    -R, --recipients-file PATH  Encrypt (or re-key) to the recipients listed at PATH. Can be repeated.
    -i, --identity PATH         Open files with the identity file at PATH. Can be repeated.
    -j PLUGIN                   Open files with the data-less plugin PLUGIN. Can be repeated.
    -a, --armor                 Encrypt to a PEM encoded format.
    --force                     Do every file again, whatever the manifest says was done.
    --workers N                 Use N processes (default: one per core).
    --report PATH               Write one JSON line per file met to PATH (- for standard output).
    --dask ADDRESS              Run the files as tasks on the Dask scheduler at ADDRESS.

encrypt writes every regular file F under SRC to DST/F.age; decrypt writes
every DST/F from SRC/F.age (other files are reported and left); rekey gives
every age file under SRC a new header for exactly the recipients, in place
or into DST, copying its payload (the file keys stay the same: see
agefast-rekey); verify decrypts and authenticates every age file under SRC
and writes nothing. Symbolic links are not followed, below SRC or DST;
DST may not be inside SRC, and no output is written inside SRC or over an
-i or -R file. Each output appears whole or not at all, and a manifest at
the root of the output (.agefast-tree.jsonl) records what was done: run
the same command again after an interruption and it does only what is
left.

SRC and DST may be fsspec URLs (s3://bucket/prefix, gs://...), with the
settings their library reads from the environment (for S3: AWS_PROFILE,
AWS_ENDPOINT_URL, ...); with --dask, each worker reads them from its own.
On S3, rekey copies each payload on the server: only the header and the
first 5 MiB of a file are sent.

A file that fails fails alone: the others are done, each failure is told on
stderr (with the first chunk that did not authenticate, where one did not),
and the exit status is 1. A summary line ends every run."""

_OPERATIONS = ("encrypt", "decrypt", "rekey", "verify")


def _flags() -> goflag.FlagSet:
    f = goflag.FlagSet()
    f.bool("version", "version")
    f.bool("armor", "a", "armor")
    f.bool("force", "force")
    f.string("workers", "workers", convert=goflag.positive_int)
    f.string("report", "report")
    f.string("dask", "dask")
    key_flags.define(f)
    return f


def _check(operation: str, args: Arguments, positional: list[str]) -> None:
    wanted = {"rekey": (1, 2), "verify": (1, 1)}.get(operation, (2, 2))
    if not wanted[0] <= len(positional) <= wanted[1]:
        raise UsageError(f"{operation} takes {' or '.join(map(str, sorted(set(wanted))))} folders, "
                         f"not {len(positional)}")
    takes_recipients = operation in ("encrypt", "rekey")
    if takes_recipients and not (args.recipients or args.recipients_files):
        raise UsageError("missing recipients", "specify them with -r/--recipient or -R/--recipients-file")
    if not takes_recipients and (args.recipients or args.recipients_files):
        raise UsageError(f"-r/--recipient and -R/--recipients-file can't be used with {operation}")
    if operation != "encrypt" and not args.identity_flags:
        raise UsageError(f"{operation} needs identities", "specify them with -i/--identity or -j")
    if operation == "encrypt" and args.identity_flags:
        raise UsageError("-i/--identity and -j can't be used with encrypt")
    if args.armor and operation != "encrypt":
        raise UsageError(f"-a/--armor can't be used with {operation}")
    if "-" in [*args.recipients_files, *args.identities]:
        raise UsageError("keys can't be read from standard input by agefast-tree")
    # As agefast refuses -o onto one: the report never replaces a key file.
    output.refuse_output_onto_an_input(args.report, key_flags.key_files(args))


def _operation(operation: str, args: Arguments, positional: list[str], client: Any) -> tree.Summary:
    # --report -: the lines go to standard output, once the job is done (_tree).
    report = None if args.report == "-" else args.report
    workers, progress = args.workers, is_terminal(sys.stderr)
    identities = key_flags.load_identities(args) if operation != "encrypt" else []
    recipients = key_flags.listed_recipients(args) if operation in ("encrypt", "rekey") else []
    src = positional[0]
    # As agefast -o refuses them (an SSH key's PATH.pub, -j batchpass's file among them): no output replaces a
    # key file, which the files need.
    keep = key_flags.key_files(args)
    if operation == "encrypt":
        return tree.encrypt(src, positional[1], recipients, armored=args.armor, force=args.force, workers=workers,
                            report=report, progress=progress, client=client, keep=keep)
    if operation == "decrypt":
        return tree.decrypt(src, positional[1], identities, force=args.force, workers=workers, report=report,
                            progress=progress, client=client, keep=keep)
    if operation == "rekey":
        dst = positional[1] if len(positional) > 1 else None
        return tree.rekey(src, identities, recipients, dst, force=args.force, workers=workers, report=report,
                          progress=progress, client=client, keep=keep)
    return tree.verify(src, identities, workers=workers, report=report, progress=progress, client=client,
                       keep=keep)


def _tree(operation: str, args: Arguments, positional: list[str]) -> int:
    client: Any = None
    if args.dask is not None:
        try:
            from distributed import Client
        except ImportError:
            raise UsageError("--dask needs dask.distributed", "install it with: pip install 'agefast[data]'") from None
        try:
            client = Client(args.dask)  # type: ignore[no-untyped-call]  # distributed's is unannotated
        except (ValueError, TypeError) as e:
            raise UsageError(f"--dask {go_quote(args.dask)}: {e}") from None
    # The error that stopped the job, or kept its report from being written, is told last: the failures and
    # the summary line first, as for any run.
    stopped: OSError | None = None
    try:
        summary = _operation(operation, args, positional, client)
    except tree.RootsRefused as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        # A job stopped, or its report not written: what it did is told first (agefast.tree.run.told_with).
        told: tree.Summary | None = getattr(e, "summary", None)
        if told is None:
            raise
        summary, stopped = told, e
    finally:
        if client is not None:
            client.close()
    if args.report == "-":
        try:
            with output.standard_output() as out:
                write_all(out, b"".join(tree.manifest.line(r) for r in summary.records))
        except OSError as e:
            stopped = stopped or e      # the job's own error first
    for record in summary.records:
        if record["status"] == "failed":
            # The first chunk that fails, where the error does not name it already ("... payload chunk 2").
            bad = record.get("chunk")
            chunk = "" if bad is None or re.search(rf"\bchunk {bad}\b", record["error"]) else f" (chunk {bad})"
            # A name is anyone's to choose: one with a newline or an escape sequence could write report lines
            # of its own, or hide this one on a terminal.
            source, error = (text if text.isprintable() else go_quote(text)
                             for text in (record["source"], record["error"]))
            print(f"agefast-tree: {source}: {error}{chunk}", file=sys.stderr)
    print(f"agefast-tree: {operation}: {summary.done} done, {summary.failed} failed, {summary.skipped} done "
          f"before, {summary.passed} left alone; {summary.bytes / 1e6:.1f} MB in {summary.seconds:.2f} s",
          file=sys.stderr)
    if stopped is not None:
        raise stopped
    return 1 if summary.failed else 0


def _run(argv: list[str]) -> int:
    if not argv or argv[0] not in _OPERATIONS:
        if argv and argv[0].startswith("-"):
            # Before an operation, -h and --version as after one; any other flag is named, as Go's flag does.
            parsed, status = goflag.parse_command(_flags(), argv, USAGE)
            if parsed is None:
                return status
        if argv:
            named = ", ".join(_OPERATIONS[:-1]) + " or " + _OPERATIONS[-1]
            problem = (f"the operation ({named}) comes first, before any flag" if argv[0].startswith("-")
                       else f"unknown operation {go_quote(argv[0])}: use {named}")
            print(f"agefast-tree: error: {problem}", file=sys.stderr)
        print(USAGE, file=sys.stderr)
        return 2
    operation = argv[0]
    parsed, status = goflag.parse_command(_flags(), argv[1:], USAGE)
    if parsed is None:
        return status
    values, positional = parsed
    # No -p: a passphrase per file would cost each file a second of scrypt.
    args = Arguments({**values, "passphrase": False}, positional)
    result = 1

    def work() -> None:
        nonlocal result
        _check(operation, args, positional)
        result = _tree(operation, args, positional)

    failed = outcome.report_failure("agefast-tree", work)
    return failed or result


def main(argv: list[str] | None = None) -> int:
    return outcome.run_cleaning_up(_run, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
