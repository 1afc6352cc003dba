"""An embedded server as a process of its own (mv.connect_server, mv.thrift_server): its command
line, a free port, waiting until the port accepts connections, and serving until SIGTERM or Ctrl-C.

Example:
    >>> serve(argv, "python -m mv.connect_server", __doc__, 15002, start, lambda host, port: f"sc://{host}:{port}")
    sc://localhost:15002
"""
from __future__ import annotations

import argparse
import signal
import socket
import threading
import time
from typing import Callable

from pyspark.sql import SparkSession


def serve(argv: list[str] | None, prog: str, doc: str, default_port: int,
          start: Callable[[int, str, dict[str, str]], SparkSession], address: Callable[[str, int], str]) -> int:
    """Parse `argv` (--port, --host, --conf KEY=VALUE), `start` the server, print its `address`
    once it listens, and serve until SIGTERM or Ctrl-C; then stop its session."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    parser.add_argument("--port", type=int, default=default_port,
                        help=f"port to listen on (default {default_port}; 0: a free one)")
    parser.add_argument("--host", default="localhost", help="address to bind (default localhost; 0.0.0.0 for all)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="another Spark setting")
    args = parser.parse_args(argv)
    conf = dict(item.split("=", 1) for item in args.conf)
    port = args.port or free_port()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    spark = start(port, args.host, conf)
    print(address(local(args.host), port), flush=True)
    try:
        while not stop.wait(1):
            pass
    finally:
        spark.stop()
    return 0


def local(host: str) -> str:
    """The address a client on this machine reaches a server bound to `host` at."""
    return "localhost" if host in ("0.0.0.0", "::") else host


def wait_for_port(host: str, port: int, timeout_s: float = 60.0) -> None:
    """Return once `host:port` accepts connections; RuntimeError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not listen on {host}:{port} within {timeout_s:.0f} s") from None
            time.sleep(0.2)


def free_port() -> int:
    """A TCP port nobody listens on now (for tests and a second server)."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]
