"""The recipient types, one module each, and the plugin protocol.

Users import them under their pyrage names (agefast.x25519, agefast.passphrase
for scrypt, ...); each wraps and unwraps a file key in its stanzas.
"""
