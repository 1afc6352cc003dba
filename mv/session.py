"""The SparkSession the engine runs on: Delta Lake configured and the window-function extension loaded.

``session()`` starts (or returns) an embedded local session set up from conf/, or with ``remote``
connects to a Spark Connect server that has the engine loaded (``python -m mv.connect_server``);
``configure(builder)`` adds only what the engine needs to a builder of your own, for a cluster or
Databricks.

Example:
    >>> import mv
    >>> spark = mv.session()
    >>> spark.sql("SELECT * FROM TUMBLE(TABLE(bids), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)")
"""
from __future__ import annotations

import logging
import os
import sys

from pyspark import SparkContext
from pyspark.sql import SparkSession

from mv import class_archive, config, jars, maintainer

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# Spark compiles each distinct piece of generated code once and keeps the last 100 compiled
# (spark.sql.codegen.cache.maxEntries). One refresh runs 100-200 of them, so under Spark's default a
# refresh compiled most of its code again each time: 40-150 compilations, 0.4-2.3 s of a 4-10 s
# Nexmark refresh at 1M bids. With 1,000 kept, a view's later refreshes compile only code whose
# constants changed (time bounds): 13-25 (docs/design.md, "What a refresh costs"). A static setting,
# so it is given to the builder unless the builder sets it.
CODEGEN_CACHE = ("spark.sql.codegen.cache.maxEntries", "1000")


def _merge_list(existing: str | None, added: list[str]) -> str:
    items = [item for item in (existing or "").split(",") if item]
    return ",".join(items + [item for item in added if item not in items])


def configure(builder: SparkSession.Builder) -> SparkSession.Builder:
    """Add Delta Lake and the window-function extension to ``builder`` and return it; the session
    it creates has this process as its maintainer (the materialized-view statements work in spark.sql).

    Keeps whatever jars, packages, extensions and settings the builder already names; keeps 1,000
    pieces of compiled code instead of Spark's 100 unless the builder says otherwise (`CODEGEN_CACHE`).

    Example:
        >>> builder = SparkSession.builder.master("spark://host:7077")
        >>> spark = mv.configure(builder).getOrCreate()
    """
    options = getattr(builder, "_options", {})
    extension = str(jars.extension_jar())
    delta = jars.delta_jars()
    jar_list = [extension] + ([str(j) for j in delta] if delta else [])
    builder = builder.config("spark.jars", _merge_list(options.get("spark.jars"), jar_list))
    if delta is None:
        builder = builder.config(
            "spark.jars.packages", _merge_list(options.get("spark.jars.packages"), jars.delta_coordinates()[:1]))
    extensions = _merge_list(options.get("spark.sql.extensions"), [DELTA_EXTENSION, jars.EXTENSION_CLASS])
    builder = (builder.config("spark.sql.extensions", extensions)
               .config("spark.sql.catalog.spark_catalog", DELTA_CATALOG))
    if CODEGEN_CACHE[0] not in options:
        builder = builder.config(*CODEGEN_CACHE)
    get_or_create = builder.getOrCreate
    builder.getOrCreate = lambda: maintainer.attach(get_or_create())  # the statements work in spark.sql
    return builder


def session(master: str | None = None, conf: dict[str, str] | None = None,
            remote: str | None = None) -> SparkSession:
    """The engine's SparkSession: an embedded local one set up from conf/, created on first call.

    Args:
        master: overrides ``spark.master`` from conf/spark-defaults.conf (e.g. ``local-cluster[2,1,1024]``).
        conf: more Spark settings, applied last (over Spark Connect: session settings only).
        remote: a Spark Connect URL (``sc://host:port``, default: ``$SPARK_REMOTE``). The session is
            then a client of that server, with no JVM in this process; the server must have Delta
            and the extension loaded, as ``python -m mv.connect_server`` does, and conf/ is its own.

    Example:
        >>> spark = mv.session(conf={"spark.sql.shuffle.partitions": "4"})
        >>> spark = mv.session(remote="sc://localhost:15002")
    """
    remote = remote or os.environ.get("SPARK_REMOTE")
    if remote:
        if master:
            raise ValueError("mv.session: give master or remote, not both")
        return _connect(remote, conf or {})
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    config.home_dir().mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder
    settings = {**config.spark_defaults(), **(conf or {})}
    if master:
        settings["spark.master"] = master
    archive = class_archive.java_options() if SparkContext._active_spark_context is None else ""
    if archive:  # looked up only when a JVM is to start: its options count only then
        java = "spark.driver.extraJavaOptions"
        settings[java] = f"{settings.get(java, '')} {archive}".strip()
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = maintainer.attach(configure(builder).getOrCreate())
    spark.sparkContext.setLogLevel(os.environ.get("MV_LOG_LEVEL", "ERROR"))
    _quiet_python_error_logs()
    return spark


def _connect(url: str, conf: dict[str, str]) -> SparkSession:
    # pyspark.sql.functions build Connect columns only while this is set; pyspark's own builder sets
    # it too, but refuses a Connect session in a process that already runs a local one.
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    builder = ConnectSession.builder.remote(url)
    if conf:
        builder = builder.config(map=conf)
    spark = builder.getOrCreate()
    _quiet_python_error_logs()
    return spark


def _quiet_python_error_logs() -> None:
    # PySpark logs every failed query, Java stack trace included, before raising it; the raised
    # error already carries the message, so the log only adds noise.
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
