"""ASCII armor (age's strict PEM-like form), written here so that armored
files do not come from the implementation under test."""

import base64

BEGIN = b"-----BEGIN AGE ENCRYPTED FILE-----"
END = b"-----END AGE ENCRYPTED FILE-----"
COLUMNS = 64


def armor(data: bytes) -> bytes:
    text = base64.b64encode(data)
    lines = [text[i:i + COLUMNS] for i in range(0, len(text), COLUMNS)]
    return b"\n".join([BEGIN, *lines, END]) + b"\n"
