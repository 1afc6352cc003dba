"""A Spark Connect server with the engine loaded, for clients that run no JVM of their own.

The server is the embedded session of ``mv.session()`` (conf/, the ``MV_HOME`` warehouse and
metastore, Delta and the window-function extension) with Spark Connect's driver plugin, which
pyspark's jars folder ships; clients connect with ``mv.session(remote="sc://host:port")``. It
prints the URL once it accepts connections and serves until SIGTERM or Ctrl-C.

Example:
    $ python -m mv.connect_server --port 15002
    sc://localhost:15002
    >>> spark = mv.session(remote="sc://localhost:15002")    # in another process
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import time

from pyspark.sql import SparkSession

from mv.session import session

CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
DEFAULT_PORT = 15002
# Clients get an error's class, message (with its hint) and parameters, not the server's Java stack
# trace, which Spark Connect otherwise sends with every error and pyspark prints under the message.
NO_JVM_TRACES = {"spark.sql.connect.serverStacktrace.enabled": "false"}


def start(port: int = DEFAULT_PORT, host: str = "localhost", conf: dict[str, str] | None = None) -> SparkSession:
    """Start the server in this process and return its (local) session once the port accepts connections.

    Example:
        >>> server = start(port=15003)
        >>> client = mv.session(remote="sc://localhost:15003")   # from another process
    """
    os.environ.pop("SPARK_REMOTE", None)  # this process is the server, not a client of one
    settings = {"spark.plugins": CONNECT_PLUGIN, "spark.connect.grpc.binding.port": str(port),
                "spark.connect.grpc.binding.address": host, **NO_JVM_TRACES, **(conf or {})}
    spark = session(conf=settings)
    _wait_for_port(_local(host), port)
    return spark


def _local(host: str) -> str:
    return "localhost" if host in ("0.0.0.0", "::") else host


def _wait_for_port(host: str, port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Spark Connect server did not listen on {host}:{port} "
                                   f"within {timeout_s:.0f} s") from None
            time.sleep(0.2)


def free_port() -> int:
    """A TCP port nobody listens on now (for tests and a second server)."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mv.connect_server", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on (default {DEFAULT_PORT}; 0: a free one)")
    parser.add_argument("--host", default="localhost", help="address to bind (default localhost; 0.0.0.0 for all)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="another Spark setting")
    args = parser.parse_args(argv)
    conf = dict(item.split("=", 1) for item in args.conf)
    port = args.port or free_port()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    spark = start(port, args.host, conf)
    print(f"sc://{_local(args.host)}:{port}", flush=True)
    try:
        while not stop.wait(1):
            pass
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
