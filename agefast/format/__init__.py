"""The age file format's text: the header grammar, ASCII armor and Bech32 keys.

No cryptography here: these modules turn bytes into stanzas, armor into
binary and strings into key bytes, and back.
"""
