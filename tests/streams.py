"""File-like test doubles shared by the tests."""

import io


class Trickle(io.RawIOBase):
    """A reader that returns at most `step` bytes per call and cannot seek."""

    def __init__(self, data: bytes, step: int = 1 << 30):
        self._data = memoryview(data)
        self._step = step

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), self._step, len(self._data))
        b[:n] = self._data[:n]
        self._data = self._data[n:]
        return n


class Repeating(io.RawIOBase):
    """A reader serving `prefix`, then `byte` repeated up to `size` bytes in
    all (without end if None); `served` counts what it handed out."""

    def __init__(self, byte: bytes, size: int | None = None, prefix: bytes = b""):
        self._prefix = prefix
        self._byte = byte
        self._left = size
        self.served = 0

    def readable(self):
        return True

    def readinto(self, b):
        n = len(b) if self._left is None else min(len(b), self._left - self.served)
        head = self._prefix[:n]
        b[:len(head)] = head
        b[len(head):n] = self._byte * (n - len(head))
        self._prefix = self._prefix[len(head):]
        self.served += n
        return n


class ShortWriter(io.RawIOBase):
    """A raw writer that accepts at most `step` bytes per call; `lengths`
    records how much each call took."""

    def __init__(self, step: int):
        self.out = bytearray()
        self.lengths = []
        self._step = step

    def writable(self):
        return True

    def write(self, b):
        n = min(len(b), self._step)
        self.out += memoryview(b)[:n]
        self.lengths.append(n)
        return n


class Sink(io.RawIOBase):
    """A writer that discards everything."""

    def writable(self):
        return True

    def write(self, b):
        return len(b)


class RecordingFile(io.FileIO):
    """A file that records where each write lands and how long it is."""

    def __init__(self, *args):
        super().__init__(*args)
        self.writes = []

    def write(self, b):
        self.writes.append((self.tell(), len(b)))
        return super().write(b)


def crossing(writes, size):
    """The writes, as (file offset, length), that cross a multiple of `size` in the file."""
    return [(at, n) for at, n in writes if at // size != (at + n - 1) // size]


def interrupt_thread_start(monkeypatch, name: str, nth: int) -> list:
    """Make the start of the `nth` thread named `name` raise KeyboardInterrupt once the thread runs, as a
    signal landing in Thread.start (which waits for the thread) does; returns the list of those started."""
    import threading

    real = threading.Thread.start
    started: list = []

    def start(thread):
        real(thread)
        if thread.name == name:
            started.append(thread)
            if len(started) == nth:
                raise KeyboardInterrupt
    monkeypatch.setattr(threading.Thread, "start", start)
    return started
