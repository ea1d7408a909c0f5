"""An HTTP server on 127.0.0.1 serving a directory, honouring single Range
requests (206 Partial Content) and counting the body bytes it sends, so that
tests and benchmarks can see what a reader fetched."""

import contextlib
import http.server
import os
import re
import threading

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def _target(self):
        path = os.path.join(self.server.root, self.path.lstrip("/").split("?")[0])
        if not os.path.isfile(path):
            self.send_error(404)
            return None
        return path

    def do_HEAD(self):
        path = self._target()
        if path is not None:
            self.send_response(200)
            self.send_header("Content-Length", str(os.path.getsize(path)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()

    def do_GET(self):
        path = self._target()
        if path is None:
            return
        size = os.path.getsize(path)
        start, end = 0, size
        match = _RANGE.match(self.headers.get("Range", ""))
        if match:
            start = int(match[1])
            end = min(size, int(match[2]) + 1) if match[2] else size
            if start >= end:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read(end - start)
        # Counted before sending: once the client has the bytes, they are counted.
        self.server.count(len(data))
        self.wfile.write(data)


class RangeServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = os.fspath(root)
        self.bytes_sent = 0
        self.requests = 0
        self._lock = threading.Lock()

    def count(self, n: int) -> None:
        with self._lock:
            self.bytes_sent += n
            self.requests += 1

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextlib.contextmanager
def serving(root):
    """A RangeServer over `root` running in a thread while the block runs."""
    server = RangeServer(root)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
