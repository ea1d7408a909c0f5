"""moto's S3 server on 127.0.0.1, for tests that reach S3 over HTTP as s3fs does, noting each request it receives
(method, key, query and body length) so that a test can see what crossed the network."""

import contextlib
from typing import NamedTuple

from required import need_module


class Request(NamedTuple):
    method: str
    path: str           # /bucket/key
    query: str
    body: int           # bytes of the request's body


class S3Server(NamedTuple):
    endpoint: str
    # What the client needs: s3fs's storage options, and the same as environment variables (botocore's).
    options: dict
    environment: dict
    requests: list


@contextlib.contextmanager
def s3_server():
    """A running moto S3 server with one bucket, "bucket"; unavailable() if moto's server or s3fs is missing."""
    need_module("s3fs")
    boto3 = need_module("boto3")
    moto_server = need_module("moto.server")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    requests = []
    try:
        served = server._server.app     # the WSGI application, wrapped to note the requests

        def noting(environ, start_response):
            requests.append(Request(environ["REQUEST_METHOD"], environ["PATH_INFO"], environ.get("QUERY_STRING", ""),
                                    int(environ.get("CONTENT_LENGTH") or 0)))
            return served(environ, start_response)

        server._server.app = noting
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket="bucket")
        yield S3Server(endpoint, {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint}},
                       {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}, requests)
    finally:
        server.stop()
