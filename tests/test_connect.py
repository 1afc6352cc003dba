"""Spark Connect: a client without a JVM runs the window functions, creates a view and refreshes it.

Given a local Connect server started with the engine (python -m mv.connect_server, its own MV_HOME),
when a client made by mv.session(remote=...) runs SQL, MV statements and a refresh, then it gets
the same answers as an embedded session; and a plain pyspark Connect client, with no `mv` package
in its process, runs every statement (tests/statement_suite.py) with the same results.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

import mv
from mv.server_process import free_port
from tests import statement_suite

START_TIMEOUT_S = 180
# A real Spark Connect server, about 70 s: make test-slow (CI runs it after make test).
pytestmark = pytest.mark.slow

# Flink's Bid table and its TUMBLE + SUM example (tests/fixtures/window_examples/flink.txt).
BIDS = [("2020-04-15 08:05:00", "4.00", "C"), ("2020-04-15 08:07:00", "2.00", "A"),
        ("2020-04-15 08:09:00", "5.00", "D"), ("2020-04-15 08:11:00", "3.00", "B"),
        ("2020-04-15 08:13:00", "1.00", "E"), ("2020-04-15 08:17:00", "6.00", "F")]
VIEW_QUERY = """SELECT item, window_start, window_end, count(*) AS bids, sum(price) AS total
    FROM TUMBLE(TABLE({table}), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)
    GROUP BY item, window_start, window_end"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The sc:// URL of a Connect server on a free port and a fresh MV_HOME; stopped afterwards."""
    home = tmp_path_factory.mktemp("mv_connect_home")
    env = {**os.environ, "MV_HOME": str(home), "MV_LOG_LEVEL": "ERROR"}
    for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
        env.pop(key, None)
    log = open(home / "server.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "mv.connect_server", "--port", str(free_port()),
         "--conf", "spark.sql.shuffle.partitions=4", "--conf", "spark.default.parallelism=4"],
        stdout=subprocess.PIPE, stderr=log, text=True, env=env, start_new_session=True)
    try:
        yield _read_url(process, home / "server.log")
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # its own process group: the server and its JVM
            process.wait()
        log.close()


def _read_url(process: subprocess.Popen, log) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 1.0)
        if ready:
            line = process.stdout.readline().strip()
            if line.startswith("sc://"):
                return line
        if process.poll() is not None:
            break
    pytest.fail(f"the Connect server did not start (exit code {process.poll()}):\n"
                + "\n".join(log.read_text().splitlines()[-30:]))


@pytest.fixture(scope="module")
def spark(server):
    # mv.session(remote=...) puts pyspark into Connect mode for this process; undo it afterwards,
    # since an embedded session of the other tests may share the process.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
        client = mv.session(remote=server)
        yield client
        client.stop()


@pytest.fixture(scope="module")
def bid(spark):
    spark.sql("CREATE TABLE bid (bidtime TIMESTAMP_NTZ, price DECIMAL(10, 2), item STRING) USING delta")
    values = ", ".join(f"(TIMESTAMP_NTZ'{t}', {p}, '{i}')" for t, p, i in BIDS)
    spark.sql(f"INSERT INTO bid VALUES {values}")
    return "bid"


def rows(df) -> set[tuple]:
    return {tuple(row) for row in df.collect()}


def test_the_session_is_a_connect_client(spark):
    from pyspark.sql.connect.session import SparkSession as ConnectSession
    assert isinstance(spark, ConnectSession)
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"  # the server's conf/


def test_a_window_function_gives_the_documented_answer(spark, bid):
    result = spark.sql(f"""SELECT window_start, window_end, SUM(price)
        FROM TUMBLE(TABLE({bid}), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)
        GROUP BY window_start, window_end ORDER BY window_start""").collect()
    assert [(str(r[0]), str(r[1]), r[2]) for r in result] == [
        ("2020-04-15 08:00:00", "2020-04-15 08:10:00", Decimal("11.00")),
        ("2020-04-15 08:10:00", "2020-04-15 08:20:00", Decimal("10.00"))]


def test_a_view_is_created_and_refreshed_incrementally(spark, bid):
    spark.sql(f"CREATE TABLE bid_changing USING delta AS SELECT * FROM {bid}")
    query = VIEW_QUERY.format(table="bid_changing")
    mv.sql(spark, f"CREATE MATERIALIZED VIEW bid_totals AS {query}")
    assert rows(spark.table("bid_totals")) == rows(spark.sql(query))

    spark.sql("INSERT INTO bid_changing VALUES (TIMESTAMP_NTZ'2020-04-15 08:21:00', 7.00, 'G'), "
              "(TIMESTAMP_NTZ'2020-04-15 08:08:00', 2.50, 'A')")
    spark.sql("UPDATE bid_changing SET price = 9.00 WHERE item = 'D'")
    spark.sql("DELETE FROM bid_changing WHERE item = 'E'")
    outcome = mv.sql(spark, "REFRESH MATERIALIZED VIEW bid_totals").first()

    assert (outcome.technique, outcome.reason) == ("incremental", "CHANGES_ONLY")
    assert rows(spark.table("bid_totals")) == rows(spark.sql(query))
    history = mv.MaterializedView.for_name(spark, "bid_totals").history().collect()
    assert [(h.refresh_id, h.technique) for h in history] == [(1, "full"), (2, "incremental")]


def test_an_engine_error_reaches_the_client_with_class_message_and_hint_and_no_jvm_trace(spark, bid):
    with pytest.raises(Exception) as raised:  # through spark.sql, as any Connect client sends it
        spark.sql(f"CREATE MATERIALIZED VIEW bid_bad SCHEDULE CRON '0 61 * * *' AS {VIEW_QUERY.format(table=bid)}")
    text = str(raised.value)
    assert raised.value.getCondition() == "MV_SCHEDULE_INVALID"
    assert "'61' is outside 0-23" in text and "Hint: Write SCHEDULE EVERY" in text
    assert "JVM stacktrace" not in text and "\tat " not in text and "org.apache.spark" not in text


@pytest.mark.compat
def test_a_plain_connect_client_runs_every_statement_as_spark_sql(server):
    script = Path(statement_suite.__file__)
    env = {key: value for key, value in os.environ.items() if key not in ("SPARK_REMOTE", "PYTHONPATH")}
    done = subprocess.run([sys.executable, "-c", PLAIN_CLIENT, str(script), server], capture_output=True,
                          text=True, env=env, timeout=600, cwd=script.parent.parent.parent)

    assert done.returncode == 0, done.stderr[-3000:]
    imported, transcript = json.loads(done.stdout.strip().splitlines()[-1])
    assert imported == []  # the client process never loaded the engine
    assert transcript == statement_suite.expected("suite_connect")


# Runs the suite's file as a script (not as part of a package), then lists any mv module it loaded.
PLAIN_CLIENT = """
import json, runpy, sys, io, contextlib
out = io.StringIO()
with contextlib.redirect_stdout(out):
    sys.argv = [sys.argv[1], sys.argv[2]]
    runpy.run_path(sys.argv[0], run_name="__main__")
print(json.dumps([[m for m in sys.modules if m == "mv" or m.startswith("mv.")], json.loads(out.getvalue())]))
"""
