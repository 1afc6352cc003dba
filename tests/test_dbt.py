"""dbt models as materialized views: dbt's adapter `mv` (dbt/adapters/mv, dbt-spark with the engine's
views) keeps a small dbt project's views equal to their queries, through dbt-spark's `session`
method in the suite's own SparkSession and its `thrift` method against a Spark Thrift server with the
engine (`python -m mv.thrift_server`, a process of its own: make test-slow).

The project (tests/fixtures/dbt_project) has two sources, `bids` and `auctions`, a windowed view
`bid_windows` and `category_windows` over it. One test per connection method walks it through a
model's life, because dbt's start-up (parsing the project) is most of the cost of each run.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

dbt_main = pytest.importorskip("dbt.cli.main", reason="dbt is an optional extra: pip install -e '.[dbt]'")

from conftest import TINY_DATA  # noqa: E402
from mv.server_process import free_port  # noqa: E402

PROJECT = Path(__file__).parent / "fixtures" / "dbt_project"
SCHEMA = "dbt_mv"
VIEWS = {  # each view's query, as its model compiles it
    "bid_windows": f"""SELECT auction, window_start, window_end, count(*) AS bids, sum(price) AS volume
                       FROM TUMBLE(TABLE({SCHEMA}.bids), DESCRIPTOR(ts), INTERVAL '10' MINUTES)
                       GROUP BY auction, window_start, window_end""",
    "category_windows": f"""SELECT a.category, w.window_start, w.window_end, sum(w.bids) AS bids, sum(w.volume) AS volume
                            FROM {SCHEMA}.bid_windows w JOIN {SCHEMA}.auctions a ON w.auction = a.id
                            GROUP BY a.category, w.window_start, w.window_end""",
}


SOURCES = [f"CREATE DATABASE IF NOT EXISTS {SCHEMA}",
           f"CREATE TABLE {SCHEMA}.bids (auction BIGINT, price BIGINT, ts TIMESTAMP) USING delta",
           f"CREATE TABLE {SCHEMA}.auctions (id BIGINT, category STRING) USING delta"]


def bids(*rows: tuple[int, int, int]) -> str:
    """(auction, price, minute past midnight of 2024-01-01) rows as VALUES."""
    return ", ".join(f"({a}, {p}, timestamp_seconds(1704067200 + {m} * 60))" for a, p, m in rows)


@pytest.fixture
def project(spark, tmp_path):
    """The dbt project in a folder of its own, over two fresh source tables."""
    spark.sql(f"DROP DATABASE IF EXISTS {SCHEMA} CASCADE")
    for statement in SOURCES:
        spark.sql(statement)
    spark.sql(f"INSERT INTO {SCHEMA}.bids VALUES {bids((1, 10, 1), (1, 20, 5), (2, 7, 12))}")
    spark.sql(f"INSERT INTO {SCHEMA}.auctions VALUES (1, 'books'), (2, 'games'), (3, 'books')")
    folder = tmp_path / "project"
    shutil.copytree(PROJECT, folder)
    settings = dict(spark.conf.getAll)
    yield folder
    for key, value in spark.conf.getAll.items():  # dbt's runs leave settings in the shared session
        if settings.get(key) != value:
            print(f"dbt changed {key}: {settings.get(key)} -> {value}")
            if key in settings:
                spark.conf.set(key, settings[key])
            elif spark.conf.isModifiable(key):
                spark.conf.unset(key)
    spark.sql(f"DROP DATABASE IF EXISTS {SCHEMA} CASCADE")


@pytest.fixture
def thrift_server(tmp_path, monkeypatch):
    """`python -m mv.thrift_server` on a free port (its own MV_HOME), which the profile's `thrift`
    target reads, and a cursor of it (PyHive). A process of its own: in the suite's driver, the
    Thrift server would close the class loader of its `spark.jars` (mv/thrift_server.py)."""
    hive = pytest.importorskip("pyhive.hive", reason="dbt's extra installs PyHive for dbt-spark's thrift method")
    port, log = free_port(), tmp_path / "thrift_server.log"
    settings = [f"--conf={key}={value}" for key, value in TINY_DATA.items()]
    server = subprocess.Popen([sys.executable, "-m", "mv.thrift_server", "--port", str(port), *settings],
                              env={**os.environ, "MV_HOME": str(tmp_path / "mv_home")}, cwd=PROJECT.parents[2],
                              stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    try:
        assert server.stdout.readline().strip() == f"localhost:{port}", f"the Thrift server did not start: {log}"
        monkeypatch.setenv("MV_DBT_THRIFT_PORT", str(port))
        connection = hive.connect("localhost", port, username="dbt")
        yield connection.cursor()
        connection.close()
    finally:
        server.terminate()
        server.wait(timeout=60)


def dbt(folder: Path, *args: str):
    """`dbt <args>` in this process, on the profile's default target: the suite's SparkSession
    (dbt-spark's session method)."""
    return dbt_main.dbtRunner().invoke([*args, "--project-dir", str(folder), "--profiles-dir", str(folder)])


def responses(result) -> dict[str, dict]:
    """Each model's adapter_response (as run_results.json has it), by name."""
    return {r.node.name: r.adapter_response for r in result.result.results}


def assert_views_equal_their_queries(spark, views=VIEWS):
    for view, query in views.items():
        assert sorted(spark.sql(f"SELECT * FROM {SCHEMA}.{view}").collect()) == sorted(spark.sql(query).collect()), view


def test_dbt_run_creates_refreshes_and_replaces_views_and_dbt_test_checks_them(spark, project):
    started = time.perf_counter()
    created = dbt(project, "run")
    assert created.success, created.exception
    assert {name: r["code"] for name, r in responses(created).items()} == {"bid_windows": "CREATE", "category_windows": "CREATE"}
    assert_views_equal_their_queries(spark)

    # New rows in both sources (after the watermark, 1 minute behind minute 12): the second `dbt run`
    # refreshes each view, upstream first, by its change.
    spark.sql(f"INSERT INTO {SCHEMA}.bids VALUES {bids((1, 5, 13), (2, 3, 15), (3, 9, 14))}")
    spark.sql(f"UPDATE {SCHEMA}.auctions SET category = 'toys' WHERE id = 2")
    refreshed = responses(dbt(project, "run"))
    assert refreshed["bid_windows"]["code"] == "REFRESH"
    assert refreshed["bid_windows"]["_message"].startswith("REFRESH incremental CHANGES_ONLY: rows_read=3 ")
    assert refreshed["category_windows"]["code"] == "REFRESH"
    assert_views_equal_their_queries(spark)

    assert dbt(project, "test").success  # the generic tests of models/sources.yml, on a view

    # `dbt docs generate` lists the views as materialized views, their query as their comment.
    assert dbt(project, "docs", "generate").success
    catalog = json.loads((project / "target" / "catalog.json").read_text())
    tables = {entry["metadata"]["name"]: entry["metadata"] for entry in [*catalog["nodes"].values(), *catalog["sources"].values()]}
    assert {name: table["type"] for name, table in tables.items()} == {
        "bid_windows": "materialized_view", "category_windows": "materialized_view", "bids": "table", "auctions": "table"}
    for view, query in VIEWS.items():
        assert " ".join(tables[view]["comment"].split()) == " ".join(query.split()), tables[view]["comment"]

    full = responses(dbt(project, "run", "--full-refresh", "--select", "bid_windows"))
    assert full["bid_windows"]["_message"].startswith("REFRESH full REQUESTED_FULL: ")

    # A changed model replaces its view, as `mv deploy` does; its new query holds.
    model = project / "models" / "bid_windows.sql"
    model.write_text(model.read_text().replace("sum(price) AS volume", "sum(price) AS volume, max(price) AS top"))
    views = {**VIEWS, "bid_windows": VIEWS["bid_windows"].replace("sum(price) AS volume", "sum(price) AS volume, max(price) AS top")}
    replaced = responses(dbt(project, "run", "--select", "bid_windows"))
    assert replaced["bid_windows"]["code"] == "REPLACE" and "(query changed)" in replaced["bid_windows"]["_message"]
    assert_views_equal_their_queries(spark, views)

    # An engine error reaches dbt's result with its class and hint, and the view stays as it was.
    model.write_text(model.read_text().replace("watermark=", "emit='on_window_close', grace='5 minutes', wm="))
    failed = dbt(project, "run", "--select", "bid_windows")
    message = failed.result.results[0].message
    assert not failed.success
    assert "MV_STATEMENT_UNSUPPORTED_COMBINATION" in message and "Add WATERMARK FOR" in message, message
    assert_views_equal_their_queries(spark, views)
    print(f"\ndbt: 7 runs in {time.perf_counter() - started:.1f} s")


@pytest.mark.slow  # a Spark driver of its own: about 65 s
def test_dbt_through_a_thrift_server_creates_and_refreshes_views(tmp_path, thrift_server):
    started = time.perf_counter()
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    for statement in [*SOURCES, f"INSERT INTO {SCHEMA}.bids VALUES {bids((1, 10, 1), (1, 20, 5), (2, 7, 12))}",
                      f"INSERT INTO {SCHEMA}.auctions VALUES (1, 'books'), (2, 'games'), (3, 'books')"]:
        thrift_server.execute(statement)
    created = dbt(project, "run", "--target", "thrift")
    assert created.success, created.exception
    assert {name: r["code"] for name, r in responses(created).items()} == {"bid_windows": "CREATE", "category_windows": "CREATE"}
    assert_views_equal_their_queries_through(thrift_server)

    thrift_server.execute(f"INSERT INTO {SCHEMA}.bids VALUES {bids((1, 5, 13), (2, 3, 15), (3, 9, 14))}")
    thrift_server.execute(f"UPDATE {SCHEMA}.auctions SET category = 'toys' WHERE id = 2")
    refreshed = responses(dbt(project, "run", "--target", "thrift"))
    assert refreshed["bid_windows"]["_message"].startswith("REFRESH incremental CHANGES_ONLY: rows_read=3 ")
    assert refreshed["category_windows"]["code"] == "REFRESH"
    assert_views_equal_their_queries_through(thrift_server)
    print(f"\ndbt through thrift: 2 runs in {time.perf_counter() - started:.1f} s")


def assert_views_equal_their_queries_through(cursor):
    def rows(query):
        cursor.execute(query)
        return sorted(cursor.fetchall())
    for view, query in VIEWS.items():
        assert rows(f"SELECT * FROM {SCHEMA}.{view}") == rows(query), view
