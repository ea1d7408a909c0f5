"""`python -m agefast` runs the agefast command."""

import sys

from agefast.cli import main

sys.exit(main())
