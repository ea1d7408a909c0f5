"""fcntl for the tests' pty drivers: the simulated platform (tests/simulated_platform) hides it from agefast, not from them."""

try:
    import fcntl
except ImportError:
    from sitecustomize import HARNESS_FCNTL as fcntl

__all__ = ["fcntl"]
