"""The every-Nexmark-query benchmark's machinery at a tiny size (bench/nexmark_queries.py).

Given Nexmark's tables made from 20,000 bids of history, when a join (q20) and a deduplication
(q18) are kept as views through a round of appends and a round of changes on every table, then
each incremental (and AUTO) view equals its query, every refresh of it was incremental, and the
report has a line per query with both rounds' ratios and AUTO's.
"""
import pytest

from bench import nexmark_data, nexmark_queries
from bench.nexmark_data import Plan

pytestmark = pytest.mark.slow   # a Spark run of its own: four tables, four views, two rounds

QUERIES = ["q20", "q18"]


@pytest.fixture(scope="module")
def results(spark, tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nexmark_data, "DATA_DIR", tmp_path_factory.mktemp("nexmark_data"))
        spark.sql("CREATE DATABASE IF NOT EXISTS bench_queries_test")  # its tables and views go with it
        spark.catalog.setCurrentDatabase("bench_queries_test")
        try:
            plan = Plan(bids=20_000)
            nexmark_queries.tables(spark, plan)
            made = nexmark_queries.create(spark, QUERIES)
            played = [nexmark_queries.play(spark, QUERIES, plan, variant, i)
                      for i, variant in enumerate(("append", "changes"))]
            rows = {q: nexmark_queries.check(spark, q) for q in QUERIES}
            yield played, nexmark_queries.summarize(played, made, rows)
        finally:
            spark.catalog.setCurrentDatabase("default")
            spark.sql("DROP DATABASE IF EXISTS bench_queries_test CASCADE")


def test_every_view_equals_its_query_after_changes_on_every_table(results):
    played, summary = results
    changed = played[1]
    assert changed["variant"] == "changes" and changed["appended"] > 0
    assert all(summary[q]["rows"] > 0 for q in QUERIES)   # check() raised if a view were not its query


def test_every_refresh_of_the_incremental_views_took_its_rule(results):
    played, summary = results
    for round_ in played:
        for q in QUERIES:
            assert round_["queries"][q]["incremental"]["technique"] == "incremental", (q, round_["variant"])
            assert round_["queries"][q]["full"]["technique"] == "full"
            assert round_["queries"][q]["full"]["reason"] == "POLICY_FULL"   # not REFRESH ... FULL, the repair
            assert round_["queries"][q]["auto"]["technique"] in ("incremental", "full")
    assert {summary[q]["shape"] for q in QUERIES} <= {"rows", "partitions"}


def test_the_report_has_a_line_per_query_with_both_ratios(results):
    played, summary = results
    document = {"measured_at": "2026-11-27T00:00:00", "machine": {"cores": 2}, "bids": 20_000,
                "rounds": {"append": 1, "changes": 1}, "load_average": {"before": [1.0], "after": [1.0]},
                "total_s": 60, "summary": summary}
    lines = nexmark_queries.markdown(document).splitlines()
    for q in QUERIES:
        line = next(line for line in lines if line.startswith(f"| {q} |"))
        assert line.count("**") == 8   # the append and the change round's ratios, and AUTO's against the cheaper
