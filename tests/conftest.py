"""One SparkSession for the whole test run, on a warehouse and metastore of its own."""
import os

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    os.environ["MV_HOME"] = str(tmp_path_factory.mktemp("mv_home"))
    import mv

    session = mv.session(conf={"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4"})
    yield session
    session.stop()


@pytest.fixture
def sql(spark):
    """Run a statement and return its rows as a list of tuples."""
    return lambda text: [tuple(row) for row in spark.sql(text).collect()]
