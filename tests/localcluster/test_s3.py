"""The local S3 server: it starts as S3 even when the port it chose is taken before moto binds it."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from stepscope_local.s3 import S3Server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


class _NotFound(http.server.BaseHTTPRequestHandler):
    """Another HTTP server (as the API emulator is): every request answers 404."""

    def do_GET(self) -> None:
        self.send_error(404)

    do_PUT = do_GET

    def log_message(self, *args: object) -> None:
        return


@contextmanager
def _other_server_on(port: int) -> Iterator[None]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def test_a_chosen_port_taken_before_moto_binds_it_is_replaced() -> None:
    s3 = S3Server()
    taken = s3.port
    with _other_server_on(taken), s3:
        assert s3.port != taken
        s3.create_bucket("traces")  # before the fix: a 404 from the other server
        client = s3.client()
        client.put_object(Bucket="traces", Key="k", Body=b"v")
        assert client.get_object(Bucket="traces", Key="k")["Body"].read() == b"v"


def test_a_port_given_by_the_caller_is_kept_and_a_taken_one_is_an_error() -> None:
    with S3Server() as free:
        port = free.port
    with _other_server_on(port), pytest.raises(RuntimeError, match=f"the last {port} \\(taken\\?\\)"):
        S3Server(port=port).start()


def test_a_restart_after_an_outage_keeps_the_port() -> None:
    with S3Server() as s3:
        port = s3.port
        s3.create_bucket("traces")
        s3.stop()
        s3.start()
        assert s3.port == port
        assert "traces" in [b["Name"] for b in s3.client().list_buckets()["Buckets"]]
