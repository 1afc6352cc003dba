"""A Spark Thrift (HiveServer2) server with the engine loaded, for JDBC/ODBC clients and dbt-spark's
`thrift` method.

The server runs in the driver of ``mv.session()`` (conf/, the ``MV_HOME`` warehouse, Delta and the
extension, this process as the statements' maintainer): each client connection is a new session of
it, where the materialized-view statements work as in spark.sql. It prints ``host:port`` once it
accepts connections and serves until SIGTERM or Ctrl-C.

Delta's and the extension's jars go on the driver's class path too (``spark.driver.extraClassPath``),
not only in ``spark.jars``: the Thrift server closes the class loader of ``spark.jars`` when a client
that ran a synchronous statement (PyHive's ``USE default`` on connecting) disconnects (Hive's
``SessionState.close``), after which Delta and the extension's classes not loaded yet are gone.

Example:
    $ python -m mv.thrift_server --port 10000
    localhost:10000
    # profiles.yml: {type: mv, method: thrift, host: localhost, port: 10000, user: me, schema: analytics}
"""
from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from mv import jars
from mv.server_process import local, serve, wait_for_port
from mv.session import session

DEFAULT_PORT = 10000


def start(port: int = DEFAULT_PORT, host: str = "localhost", conf: dict[str, str] | None = None) -> SparkSession:
    """Start the server in this process and return its session once the port accepts connections.

    Example:
        >>> spark = start(port=10001)
        >>> pyhive.hive.connect("localhost", 10001, username="me")   # from another process
    """
    os.environ.pop("SPARK_REMOTE", None)  # this process is the server, not a client of one
    delta = jars.delta_jars() or []
    classpath = os.pathsep.join(str(jar) for jar in [jars.extension_jar(), *delta])
    settings = {"spark.driver.extraClassPath": classpath, "hive.server2.thrift.port": str(port),
                "hive.server2.thrift.bind.host": host, **(conf or {})}
    spark = session(conf=settings)
    spark._jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
        spark._jsparkSession.sqlContext())
    wait_for_port(local(host), port)
    return spark


def main(argv: list[str] | None = None) -> int:
    return serve(argv, "python -m mv.thrift_server", __doc__, DEFAULT_PORT, start, lambda host, port: f"{host}:{port}")


if __name__ == "__main__":
    sys.exit(main())
