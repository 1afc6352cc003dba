"""One SparkSession for the whole test run, on a warehouse and metastore of its own."""
import os

import pytest

# Settings for the suite's tiny tables, each measured on the suite (docs/design.md, "The test suite"):
# - whole-stage code generation off: compiling a stage's Java costs more than it saves on a few
#   hundred rows, and the extension's operators have no generated code of their own;
# - adaptive execution off and two shuffle partitions: one job per query, a task per core;
# - Spark's in-memory catalog instead of the Hive metastore: no Derby behind every table lookup;
# - plans that name a scan's location in full (Spark cuts it at 100 characters), so the files a
#   refresh reads are told apart by table (bench/probe.py) under pytest's long worker folders.
# Together they take about a fifth off the suite. `spark.sql.codegen.factoryMode=NO_CODEGEN` saved
# more but breaks spark.catalog.listTables in Spark 4.2 (EXPRESSION_DECODING_FAILED). The tests that
# start their own processes (the CLI's process tests, the kill test, notebooks, Connect, the local
# cluster) run the engine's defaults: Hive metastore, adaptive execution, code generation.
TINY_DATA = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.catalogImplementation": "in-memory",
    "spark.sql.maxMetadataStringLength": "1000",
}


# The files of make test-slow's longest tests go first: each worker runs a file at a time (--dist
# loadfile), and a file of many minutes started last is the run's tail (the random kills, 12
# minutes under load, once started after 25). Every other file keeps its place.
LONGEST_FIRST = ("test_mv_exactly_once.py", "test_nexmark_rows.py", "test_row_views.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests keep their order


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    os.environ["MV_HOME"] = str(tmp_path_factory.mktemp("mv_home"))
    import mv

    session = mv.session(conf=TINY_DATA)
    yield session
    session.stop()


@pytest.fixture
def sql(spark):
    """Run a statement and return its rows as a list of tuples."""
    return lambda text: [tuple(row) for row in spark.sql(text).collect()]
