"""The API reference (docs/api.md, docs/errors.md) covers every public name of agefast."""

import pathlib
import re
import subprocess
import sys

import agefast

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
REFERENCE = (DOCS / "api.md", DOCS / "errors.md")


def documented_names() -> set[str]:
    """The objects the reference pages hand to autodoc, as dotted names."""
    return {name for page in REFERENCE for name in re.findall(r"^\.\. auto\w+:: (agefast[\w.]*)$", page.read_text(), re.M)}


def test_every_public_name_is_in_the_api_reference():
    documented = documented_names()
    missing = [name for name in agefast.__all__ if f"agefast.{name}" not in documented]
    assert missing == [], f"agefast.__all__ names missing from the API reference: {missing}"


def test_every_error_class_is_in_the_api_reference():
    documented = documented_names()
    errors = [name for name, obj in vars(agefast.errors).items()
              if isinstance(obj, type) and issubclass(obj, Exception) and obj.__module__ == "agefast.errors"]
    missing = [name for name in errors
               if f"agefast.errors.{name}" not in documented and f"agefast.{name}" not in documented]
    assert missing == [], f"agefast.errors classes missing from the API reference: {missing}"


def test_the_documented_errors_are_reached_from_a_fresh_import_agefast():
    # The docs write `except agefast.errors.PayloadError`: that must not
    # depend on some other import having loaded the module first.
    done = subprocess.run([sys.executable, "-c", "import agefast; print(agefast.errors.PayloadError.__name__)"],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "PayloadError\n"), done.stderr
