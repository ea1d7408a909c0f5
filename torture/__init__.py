"""agetorture: an adversarial conformance and stress suite for age implementations.

It makes age files across size strata — honest, forged with chosen keys and
nonces, tampered, with header grammar variations and broken armor — and
compares the answers of each target (agefast through its whole API by
default, pyrage, a module with pyrage's API, or any command-line decryptor)
with a slow reference built here directly on cryptography. Disagreements go
into a JSON and HTML report, each group with a reproducer.
"""
