"""dbt models as materialized views (integrations/dbt): a small dbt project, run with dbt-core and
dbt-spark's `session` method in the suite's own SparkSession, keeps its views equal to their queries.

The project (tests/fixtures/dbt_project) has two sources, `bids` and `auctions`, a windowed view
`bid_windows` and `category_windows` over it. One test walks it through a model's life, because dbt's
start-up (parsing the project) is most of the cost of each run.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

dbt_main = pytest.importorskip("dbt.cli.main", reason="dbt is an optional extra: pip install -e '.[dbt]'")

PROJECT = Path(__file__).parent / "fixtures" / "dbt_project"
PACKAGE = Path(__file__).parent.parent / "integrations" / "dbt"
SCHEMA = "dbt_mv"
VIEWS = {  # each view's query, as its model compiles it
    "bid_windows": f"""SELECT auction, window_start, window_end, count(*) AS bids, sum(price) AS volume
                       FROM TUMBLE(TABLE({SCHEMA}.bids), DESCRIPTOR(ts), INTERVAL '10' MINUTES)
                       GROUP BY auction, window_start, window_end""",
    "category_windows": f"""SELECT a.category, w.window_start, w.window_end, sum(w.bids) AS bids, sum(w.volume) AS volume
                            FROM {SCHEMA}.bid_windows w JOIN {SCHEMA}.auctions a ON w.auction = a.id
                            GROUP BY a.category, w.window_start, w.window_end""",
}


def bids(*rows: tuple[int, int, int]) -> str:
    """(auction, price, minute past midnight of 2024-01-01) rows as VALUES."""
    return ", ".join(f"({a}, {p}, timestamp_seconds(1704067200 + {m} * 60))" for a, p, m in rows)


@pytest.fixture
def project(spark, tmp_path):
    """The dbt project in a folder of its own, its package installed from this checkout (`dbt deps`),
    over two fresh source tables."""
    spark.sql(f"DROP DATABASE IF EXISTS {SCHEMA} CASCADE")
    spark.sql(f"CREATE DATABASE {SCHEMA}")
    spark.sql(f"CREATE TABLE {SCHEMA}.bids (auction BIGINT, price BIGINT, ts TIMESTAMP) USING delta")
    spark.sql(f"CREATE TABLE {SCHEMA}.auctions (id BIGINT, category STRING) USING delta")
    spark.sql(f"INSERT INTO {SCHEMA}.bids VALUES {bids((1, 10, 1), (1, 20, 5), (2, 7, 12))}")
    spark.sql(f"INSERT INTO {SCHEMA}.auctions VALUES (1, 'books'), (2, 'games'), (3, 'books')")
    folder = tmp_path / "project"
    shutil.copytree(PROJECT, folder)
    (folder / "packages.yml").write_text(f"packages:\n  - local: {PACKAGE}\n")
    assert dbt(folder, "deps").success
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


def dbt(folder: Path, *args: str):
    """`dbt <args>` in this process, on the suite's SparkSession (dbt-spark's session method)."""
    return dbt_main.dbtRunner().invoke([*args, "--project-dir", str(folder), "--profiles-dir", str(folder)])


def responses(result) -> dict[str, dict]:
    """Each model's adapter_response (as run_results.json has it), by name."""
    return {r.node.name: r.adapter_response for r in result.result.results}


def assert_views_equal_their_queries(spark):
    for view, query in VIEWS.items():
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

    full = responses(dbt(project, "run", "--full-refresh", "--select", "bid_windows"))
    assert full["bid_windows"]["_message"].startswith("REFRESH full REQUESTED_FULL: ")

    # A changed model replaces its view, as `mv deploy` does; its new query holds.
    model = project / "models" / "bid_windows.sql"
    model.write_text(model.read_text().replace("sum(price) AS volume", "sum(price) AS volume, max(price) AS top"))
    VIEWS["bid_windows"] = VIEWS["bid_windows"].replace("sum(price) AS volume", "sum(price) AS volume, max(price) AS top")
    replaced = responses(dbt(project, "run", "--select", "bid_windows"))
    assert replaced["bid_windows"]["code"] == "REPLACE" and "(query changed)" in replaced["bid_windows"]["_message"]
    assert_views_equal_their_queries(spark)

    # An engine error reaches dbt's result with its class and hint, and the view stays as it was.
    model.write_text(model.read_text().replace("watermark=", "emit='on_window_close', grace='5 minutes', wm="))
    failed = dbt(project, "run", "--select", "bid_windows")
    message = failed.result.results[0].message
    assert not failed.success
    assert "MV_STATEMENT_UNSUPPORTED_COMBINATION" in message and "Add WATERMARK FOR" in message, message
    assert_views_equal_their_queries(spark)
    print(f"\ndbt: 6 runs in {time.perf_counter() - started:.1f} s")
