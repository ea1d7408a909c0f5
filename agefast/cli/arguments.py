"""The parsed command line of `agefast`, `agefast-rekey` and `agefast-tree`, apart from the commands, so that what reads the key
flags (key_flags) can name it without importing a command."""

from typing import Any


class Arguments:
    """The parsed command line."""

    # The flags' values, by their dest in the commands' flag tables (age._flags()), set from `values`.
    version: bool
    decrypt: bool
    encrypt: bool
    passphrase: bool
    output: str | None
    armor: bool
    recipients: list[str]
    recipients_files: list[str]
    identity_flags: list[tuple[str, str]]
    threads: int | None
    warm_up: bool
    # agefast-tree's own
    force: bool
    workers: int | None
    report: str | None
    dask: str | None

    def __init__(self, values: dict[str, Any], positional: list[str]) -> None:
        self.__dict__.update(values)
        # As in Go age, an empty OUTPUT or INPUT is standard output or input, as when it is not given.
        if values.get("output") == "":
            self.output = None
        self.input = (positional[0] or None) if positional else None
        self.identities = [value for kind, value in self.identity_flags if kind == "i"]
