"""agetorture: an adversarial conformance and stress suite for age implementations.

It drives an implementation under test (agefast by default, through its public
API only) across size strata, hostile readers and writers, degraded keys and a
tamper matrix, and checks every file against independent oracles: the Go `age`
CLI, pyrage, and a slow reference built here directly on cryptography.
"""
