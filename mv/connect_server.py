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

import os
import sys

from pyspark.sql import SparkSession

from mv.server_process import local, serve, wait_for_port
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
    wait_for_port(local(host), port)
    return spark


def main(argv: list[str] | None = None) -> int:
    return serve(argv, "python -m mv.connect_server", __doc__, DEFAULT_PORT, start,
                 lambda host, port: f"sc://{host}:{port}")


if __name__ == "__main__":
    sys.exit(main())
