import os
import sys

# broken_stream.py sits beside the tests that import it.
sys.path.insert(0, os.path.dirname(__file__))
