"""The maintainer behind the SQL statements: the extension hands it every materialized-view statement.

The extension's parser plans `CREATE / REFRESH / DROP / SHOW / DESCRIBE / EXPLAIN ... MATERIALIZED
VIEW` as a command (mv/jvm/MaterializedViewStatements.scala) that calls the handler this module
registers in the driver's JVM, through PySpark's own channel from the JVM to Python (the one
foreachBatch and query listeners use). So the statements are Spark SQL wherever the driver is
this Python process: `spark.sql`, `%sql` cells, and every Spark Connect client of
`python -m mv.connect_server`. mv.session(), mv.configure() and the Connect server attach it.

Example:
    >>> spark = SparkSession.builder.config(...).getOrCreate()     # Delta and the extension loaded
    >>> mv.attach(spark)
    >>> spark.sql("REFRESH MATERIALIZED VIEW hourly").show()
"""
from __future__ import annotations

import json
import threading

from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import SparkSession

from mv import errors
from mv.jars import EXTENSION_CLASS

_lock = threading.Lock()
_attached: set[int] = set()  # ids of the gateways whose JVM has this process's handler


class Handler:
    """Runs one statement for the JVM: its rows as JSON, the engine's error as JSON, or the Spark
    error it met (the Java exception itself, so Spark raises it unchanged)."""

    def __init__(self, spark: SparkSession):
        self._context = spark.sparkContext

    def run(self, jsession, text: str):
        from mv import commands  # commands imports the whole refresh; loaded on the first statement
        spark = SparkSession(self._context, jsparkSession=jsession)
        try:
            return json.dumps({"rows": [list(row) for row in commands.run(spark, text)]})
        except errors.MvError as e:
            return json.dumps({"error_class": e.error_class, "text": str(e), "params": e.params})
        except CapturedException as e:
            if getattr(e, "_origin", None) is not None:
                return e._origin
            return json.dumps(errors.internal(str(e)).as_json())
        except Exception as e:  # noqa: BLE001 - the JVM gets a clear error, not a Python traceback
            return json.dumps(errors.internal(f"{type(e).__name__}: {e}").as_json())

    class Java:
        implements = ["io.mvengine.MaintainerHandler"]


def extension(spark: SparkSession):
    """The extension's objects (the JVM package io.mvengine) when this process drives `spark`'s
    driver, a classic session: the maintainer calls them through py4j, without a SQL statement
    around each call (a parse, an analysis and an execution, about 20 ms). None over Spark
    Connect, which has no JVM in its process: there the table functions serve.

    Example:
        >>> extension(spark).DeltaTables.tablesJson(spark._jsparkSession, '["bids"]')
        '[{"name":"bids","version":7,...}]'
    """
    return spark._jvm.io.mvengine if hasattr(spark, "_jsparkSession") else None


def attach(spark: SparkSession) -> SparkSession:
    """Register this process as the maintainer of `spark`'s driver (a local, classic session), once;
    a Spark Connect session is left as it is (its server has its own). Returns `spark`."""
    jvm = extension(spark)
    if jvm is None:
        return spark
    gateway = spark.sparkContext._gateway
    if id(gateway) in _attached and jvm.Maintainer.isRegistered():
        return spark  # as every statement finds it: one call, not a copy of the whole configuration (20 ms)
    if EXTENSION_CLASS not in spark.sparkContext.getConf().get("spark.sql.extensions", ""):
        raise errors.extension_not_loaded()
    with _lock:
        if id(gateway) in _attached and jvm.Maintainer.isRegistered():
            return spark
        from pyspark.java_gateway import ensure_callback_server_started
        ensure_callback_server_started(gateway)
        jvm.Maintainer.register(Handler(spark))
        _attached.add(id(gateway))
    return spark
