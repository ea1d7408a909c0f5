"""The STREAM payload: 64 KiB ChaCha20-Poly1305 chunks, and the ways it moves.
"""
