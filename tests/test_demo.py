"""The demo behind `make demo`, end to end on a small auction site: given a fresh `nexmark`
database, when the demo generates its history, deploys catalog/ and plays its rounds, then every
refresh after the first is incremental, too-late bids land in highest_bid__late, every view is
checked against its query, and a view that differs fails the demo.
"""
from __future__ import annotations

import io

import pytest
from pyspark.sql import SparkSession

from mv import cli, demo
from tests.outside_writes import committed_outside

# The whole demo, about 40 s: make test-slow (CI runs it after make test).
pytestmark = pytest.mark.slow

SMALL = demo.Size(bids_per_minute=40, auctions_per_minute=4, persons_per_minute=2, hours=1, rounds=1)
VIEWS = ["highest_bid", "hot_items", "hot_items_peak", "new_users", "user_sessions"]


@pytest.fixture(scope="module")
def played(spark):
    """One small run of the demo for this module: (its result, what it printed)."""
    out = io.StringIO()
    result = demo.main(spark, SMALL, out=out)
    yield result, out.getvalue()
    spark.sql(f"DROP DATABASE IF EXISTS {demo.DATABASE} CASCADE")


def test_the_demo_plays_its_rounds_incrementally_and_checks_every_view(played, spark):
    result, printed = played
    assert sorted(result.checked) == VIEWS
    assert "\nchecked: " in printed
    assert result.chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(result.chart) in printed
    assert len(result.rounds) == SMALL.rounds
    assert [sorted(o.view for o, _ in outcomes) for outcomes in result.rounds] == [VIEWS] * SMALL.rounds
    refreshes = [o for outcomes in result.rounds for o, _ in outcomes]
    assert {(o.technique, o.reason) for o in refreshes} == {("incremental", "CHANGES_ONLY")}
    assert printed.count("  hot items ") == SMALL.rounds
    assert spark.catalog.currentDatabase() == "default"  # the demo leaves the caller's database as it was
    assert SparkSession.active() is spark  # and its session the active one, not a refresh's own session


def test_only_the_view_with_a_watermark_has_late_rows_and_they_are_in_its_late_table(played, spark):
    result, _ = played
    late = {o.view: o.late_rows for outcomes in result.rounds for o, _ in outcomes if o.late_rows}
    assert list(late) == ["highest_bid"]
    assert all(o.rows_updated for outcomes in result.rounds for o, _ in outcomes  # late bids within its grace
               if o.view == "highest_bid")
    assert spark.table(f"{demo.DATABASE}.highest_bid__late").count() == sum(
        o.late_rows for outcomes in result.rounds for o, _ in outcomes)


def test_a_view_that_differs_from_its_query_fails_the_check(played, spark):
    with demo.in_database(spark, demo.DATABASE):
        location = spark.sql("DESCRIBE DETAIL hot_items").first().location  # around the read-only rule
        committed_outside(spark, location, rows=spark.table("hot_items").orderBy("window_start", "auction").limit(1))
        with pytest.raises(demo.ViewMismatch, match="hot_items differs from its query"):
            demo.check(spark, ["hot_items"])


def test_a_mismatch_makes_mv_demo_exit_with_1(monkeypatch, capsys):
    def mismatch(*args, **kwargs):
        raise demo.ViewMismatch("hot_items differs from its query recomputed from scratch")
    monkeypatch.setattr(demo, "main", mismatch)
    assert cli.main(["demo"]) == 1
    assert capsys.readouterr().err.startswith("error [ViewMismatch]: hot_items differs")
