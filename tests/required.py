"""The one rule for a test that needs what a machine may lack (a system tool,
a package of the test extra, root, a C compiler driver, the shared vectors):
skipped with the reason, or failed under AGEFAST_REQUIRE_TOOLS=1. CI
(.ci/run) installs everything and runs as root, then sets that variable, so
that nothing it should test is quietly skipped."""

import importlib
import os
import shutil
from types import ModuleType
from typing import NoReturn

import pytest

REQUIRE_TOOLS = os.environ.get("AGEFAST_REQUIRE_TOOLS") == "1"


def unavailable(reason: str) -> NoReturn:
    """Skip the test (or the module, called at its top level) because of
    `reason`; under AGEFAST_REQUIRE_TOOLS=1 fail it instead."""
    if REQUIRE_TOOLS:
        pytest.fail(f"{reason}, and AGEFAST_REQUIRE_TOOLS=1 says the tests have all they need", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def missing_tools(names) -> str | None:
    """Why a test needing the programs `names` cannot run, if one is not on PATH."""
    missing = [name for name in names if shutil.which(name) is None]
    return f"needs {', '.join(missing)} on PATH" if missing else None


def need_tools(*names: str) -> None:
    """unavailable() unless every program in `names` is on PATH."""
    if (reason := missing_tools(names)) is not None:
        unavailable(reason)


def not_root(why: str) -> str | None:
    """Why a test cannot do `why`, if this process is not root."""
    return f"{why} needs root" if os.geteuid() != 0 else None


def need_module(name: str) -> ModuleType:
    """The module `name` (a package of the test extra), or unavailable()."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        unavailable(f"needs the Python module {name} (pip install -e '.[test]'): {e}")
