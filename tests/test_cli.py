"""The `mv` command, specified by example: given these views and files, when this command runs, then
it prints this and exits with that code. Most tests run `mv.cli.main` in this process, on the
test session; two run the installed `mv` as a real process, as a shell, cron or CI would.

Errors are asserted by their class and the shape of the output, not by their prose.
"""
from __future__ import annotations

import io
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import mv
from bench.refresh import _executions_since, execution_marker
from mv import cli, progress, refresh
from mv.errors import MvError

REPO = Path(__file__).resolve().parent.parent
MV = Path(sys.executable).parent / "mv"
COUNTS = """SELECT window_start, window_end, item, count(*) AS n
            FROM TUMBLE(TABLE({source}), DESCRIPTOR(ts), INTERVAL '10' MINUTES)
            GROUP BY window_start, window_end, item"""
_ids = itertools.count()
CATALOG_VIEWS = ["highest_bid", "hot_items", "hot_items_peak", "new_users", "user_sessions"]  # catalog/, sorted


class Given:
    """Tables and views one test makes, with unique names; dropped when the test ends, so that the
    commands that act on every view (--all, --due, the scheduler) see only this test's views."""

    def __init__(self, spark, tmp_path: Path):
        self.spark, self.tmp_path = spark, tmp_path
        self.tables: list[str] = []
        self.views: list[str] = []

    def name(self, stem: str) -> str:
        return f"cli_{stem}_{next(_ids)}"

    def source(self, *rows: str) -> str:
        """A Delta table of (item, ts, price) with rows like "('a', '00:01', 4)"."""
        name = self.name("bids")
        self.tables.append(name)
        self.spark.sql(f"CREATE TABLE {name} (item STRING, ts TIMESTAMP, price INT) USING delta")
        self.insert(name, *rows)
        return name

    def insert(self, table: str, *rows: tuple) -> None:
        if rows:
            values = ", ".join(f"('{i}', TIMESTAMP'2024-01-01 {t}:00', {p})" for i, t, p in rows)
            self.spark.sql(f"INSERT INTO {table} VALUES {values}")

    def view(self, source: str, clauses: str = "") -> str:
        name = self.name("view")
        self.views.append(name)
        mv.sql(self.spark, f"CREATE MATERIALIZED VIEW {name} {clauses} AS {COUNTS.format(source=source)}")
        return name

    def catalog(self, files: dict[str, str]) -> Path:
        folder = self.tmp_path / f"catalog_{next(_ids)}"
        folder.mkdir()
        for file, text in files.items():
            (folder / file).write_text(text)
        return folder

    def drop(self) -> None:
        for view in reversed(self.views):
            mv.sql(self.spark, f"DROP MATERIALIZED VIEW IF EXISTS {view}")
        for table in self.tables:
            self.spark.sql(f"DROP TABLE IF EXISTS {table}")


@pytest.fixture
def given(spark, tmp_path):
    made = Given(spark, tmp_path)
    yield made
    made.drop()


@pytest.fixture
def run(spark, capsys):
    """Run `mv ARGS...` in this process: (exit code, stdout, stderr)."""
    def run_(*args: str) -> tuple[int, str, str]:
        code = cli.main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err
    return run_


def sorted_rows(spark, table: str, *columns: str) -> list[tuple]:
    return [tuple(r) for r in spark.table(table).select(*columns).orderBy(*columns).collect()]


def view_sql(name: str, source: str, clauses: str = "") -> str:
    return f"CREATE MATERIALIZED VIEW {name} {clauses}\nAS {COUNTS.format(source=source)}\n"


# --- mv sql --------------------------------------------------------------------------------------

def test_sql_runs_several_statements_and_prints_each_result_as_a_table(run, given):
    source = given.source(("a", "00:01", 4), ("b", "00:12", 7))
    code, out, _ = run("sql", f"SELECT item, price, 'x;y' AS text FROM {source} ORDER BY item; "
                              "SELECT NULL AS nothing")
    assert code == 0
    assert out.splitlines() == [
        "item  price  text",
        "----  -----  ----",
        "a         4  x;y",
        "b         7  x;y",
        "(2 rows)",
        "",
        "nothing",
        "-------",
        "NULL",
        "(1 row)",
    ]


def test_sql_file_runs_materialized_view_statements_and_plain_spark_sql(run, given, tmp_path):
    source, view = given.source(("a", "00:01", 4)), given.name("view")
    given.views.append(view)
    script = tmp_path / "script.sql"
    script.write_text(f"-- a view; and its refresh\n{view_sql(view, source)};\n"
                      f"INSERT INTO {source} VALUES ('a', TIMESTAMP'2024-01-01 00:02:00', 1);\n"
                      f"REFRESH MATERIALIZED VIEW {view};\nSELECT item, n FROM {view}")
    code, out, _ = run("sql", "-f", script)
    assert code == 0
    assert f"created {view}: 1 rows" in out
    assert "incremental" in out and "CHANGES_ONLY" in out
    assert out.rstrip().endswith("a     2\n(1 row)")


def test_a_malformed_statement_is_one_error_line_with_its_fragment_and_a_hint_and_nothing_runs(run, given, spark):
    table = given.name("never")
    code, out, err = run("sql", f"CREATE TABLE {table} (a INT) USING delta; "
                                "CREATE MATERIALIZED VIEW v EMIT ON WINDOW AS SELECT 1")
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0] == "error [MV_STATEMENT_SYNTAX]: Expected EMIT ON WINDOW CLOSE or EMIT ON UPDATE, found 'WINDOW'."
    assert lines[-1].startswith("hint: ")
    assert "^^^^^^" in err and "Traceback" not in err
    assert not spark.catalog.tableExists(table)


def test_spark_errors_show_their_error_class_and_verbose_adds_the_details(run):
    code, _, err = run("sql", "SELECT * FROM cli_no_such_table")
    assert code == 1
    assert err.splitlines() == [err.splitlines()[0]]
    assert err.startswith("error [TABLE_OR_VIEW_NOT_FOUND]: The table or view `cli_no_such_table` cannot be found.")

    code, _, verbose = run("--verbose", "sql", "SELECT * FROM cli_no_such_table")
    assert code == 1 and len(verbose.splitlines()) > 1 and "Search path" in verbose
    assert "\tat org.apache" not in verbose and "Traceback" not in verbose


def test_a_wrong_command_line_exits_with_2(run):
    assert run("refresh")[0] == 2
    assert run("refresh", "--all", "--due")[0] == 2
    assert run("frobnicate")[0] == 2
    assert run("--help")[0] == 0


# --- mv deploy -----------------------------------------------------------------------------------

def test_deploy_creates_upstream_views_first_then_leaves_unchanged_ones_alone(run, given, spark):
    source, upstream, downstream = given.name("bids"), given.name("view"), given.name("view")
    given.tables.append(source)
    given.views += [downstream, upstream]
    folder = given.catalog({
        "a_downstream.sql": f"""CREATE MATERIALIZED VIEW {downstream}
            AS SELECT item, sum(n) AS n FROM {upstream} GROUP BY item""",
        "b_upstream.sql": view_sql(upstream, source),
        "sources.sql": f"""-- sources; declared, never loaded here
            CREATE TABLE IF NOT EXISTS {source} (item STRING, ts TIMESTAMP, price INT) USING delta;""",
    })

    code, out, _ = run("deploy", folder)
    assert code == 0
    assert [line.split()[:2] for line in out.splitlines()[:3]] == [
        ["ran", "CREATE"], ["created", upstream], ["created", downstream]]
    assert out.splitlines()[-1] == f"deployed {folder}: 2 created, 0 replaced, 0 unchanged"

    code, out, _ = run("deploy", folder)
    assert code == 0
    assert out.splitlines()[-1] == f"deployed {folder}: 0 created, 0 replaced, 2 unchanged"


def test_deploy_plan_shows_what_differs_and_changes_nothing_then_deploy_replaces_only_that(run, given, spark):
    source = given.source(("a", "00:01", 4))
    kept, changed = given.view(source, "SCHEDULE EVERY 5 MINUTES"), given.view(source, "SCHEDULE EVERY 5 MINUTES")
    folder = given.catalog({
        "kept.sql": view_sql(kept, source, "schedule   every 5 minutes -- only the layout differs"),
        "changed.sql": view_sql(changed, source, "SCHEDULE EVERY 10 MINUTES EMIT ON UPDATE"),
    })

    code, out, _ = run("deploy", folder, "--plan")
    assert code == 0
    assert f"  replace    {changed}  (changed.sql)" in out
    assert "      schedule: SCHEDULE EVERY 5 MINUTES -> SCHEDULE EVERY 10 MINUTES" in out
    assert f"  unchanged  {kept}" in out
    assert "0 to create, 1 to replace, 1 unchanged" in out
    assert mv.MaterializedView.for_name(spark, changed).definition.schedule == "SCHEDULE EVERY 5 MINUTES"

    code, out, _ = run("deploy", folder)
    assert code == 0 and out.splitlines()[-1].endswith("0 created, 1 replaced, 1 unchanged")
    assert mv.MaterializedView.for_name(spark, changed).definition.schedule == "SCHEDULE EVERY 10 MINUTES"
    assert mv.MaterializedView.for_name(spark, kept).history().count() == 1  # never recreated


@pytest.mark.parametrize("files, error_class", [
    ({"load.sql": "INSERT INTO t VALUES (1)"}, "MV_CATALOG_NOT_DECLARATIVE"),
    ({"plain.sql": "CREATE TABLE t (a INT) USING delta"}, "MV_CATALOG_NOT_DECLARATIVE"),
    ({"two.sql": "CREATE MATERIALIZED VIEW a AS SELECT 1; CREATE MATERIALIZED VIEW b AS SELECT 1"},
     "MV_CATALOG_ONE_VIEW_PER_FILE"),
    ({"a.sql": "CREATE MATERIALIZED VIEW cli_x AS SELECT 1",
      "b.sql": "CREATE MATERIALIZED VIEW CLI_X AS SELECT 2"}, "MV_CATALOG_DUPLICATE_VIEW"),
    ({"a.sql": "CREATE MATERIALIZED VIEW cli_ping AS SELECT * FROM cli_pong",
      "b.sql": "CREATE MATERIALIZED VIEW cli_pong AS SELECT * FROM cli_ping"}, "MV_CATALOG_CYCLE"),
    ({"a.sql": "CREATE MATERIALIZED VIEW cli_y SCHEDULE CRON '61 * * * *' AS SELECT 1"}, "MV_SCHEDULE_INVALID"),
    ({}, "MV_CATALOG_NOT_FOUND"),
])
def test_deploy_checks_every_file_before_it_changes_anything(run, given, spark, files, error_class):
    source = given.name("bids")
    given.tables.append(source)
    folder = given.catalog({"0_sources.sql": f"CREATE TABLE IF NOT EXISTS {source} (a INT) USING delta",
                            **files} if files else {})
    code, out, err = run("deploy", folder)
    assert code == 1 and out == ""
    assert err.startswith(f"error [{error_class}]: ") and "\nhint: " in err
    assert not spark.catalog.tableExists(source)


@pytest.mark.slow  # the repository's whole catalog, about 25 s: make test-slow
def test_the_repositorys_catalog_deploys_and_refreshes_upstream_first(run, spark):
    spark.sql("CREATE DATABASE cli_catalog")  # the catalog's names are unqualified: a database of its own
    spark.catalog.setCurrentDatabase("cli_catalog")
    try:
        code, out, _ = run("deploy", REPO / "catalog")
        assert code == 0, out
        created = [line.split()[1] for line in out.splitlines() if line.startswith("created")]
        assert sorted(created) == CATALOG_VIEWS
        assert created.index("hot_items") < created.index("hot_items_peak")

        spark.sql("""INSERT INTO persons VALUES
                     (7, 'Kate Smith', 'user7@example.com', 'Bend', 'OR', TIMESTAMP'2024-01-01 00:01:00')""")
        spark.sql("""INSERT INTO auctions VALUES (1, 'vintage lamp', 10, 100, 7, 10,
                     TIMESTAMP'2024-01-01 00:05:00', TIMESTAMP'2024-01-01 01:05:00')""")
        spark.sql("""INSERT INTO bids VALUES (1, 7, 10, 'Apple', TIMESTAMP'2024-01-01 00:10:00'),
                     (1, 7, 20, 'Apple', TIMESTAMP'2024-01-01 00:15:00'),
                     (1, 8, 30, 'Google', TIMESTAMP'2024-01-01 01:10:00')""")
        code, out, _ = run("refresh", "--all")
        assert code == 0
        refreshed = [line.split()[1].rstrip(":") for line in out.splitlines()]
        assert sorted(refreshed) == CATALOG_VIEWS
        assert refreshed.index("hot_items") < refreshed.index("hot_items_peak")
        assert sorted_rows(spark, "highest_bid", "highest", "bids") == [(20, 2)]  # 01:10's window is still open
        assert sorted_rows(spark, "hot_items_peak", "top_bids") == [(1,), (1,), (1,), (1,), (2,)]
        assert sorted_rows(spark, "new_users", "id", "name", "auctions") == [(7, "Kate Smith", 1)]
        assert sorted_rows(spark, "user_sessions", "bidder", "bids") == [(7, 2), (8, 1)]

        code, out, _ = run("ls")
        assert code == 0 and [line.split()[0] for line in out.splitlines()[2:]] == CATALOG_VIEWS
    finally:
        spark.catalog.setCurrentDatabase("default")
        spark.sql("DROP DATABASE IF EXISTS cli_catalog CASCADE")


# --- mv refresh ----------------------------------------------------------------------------------

def test_refresh_prints_one_line_per_view_when_not_on_a_terminal(run, given):
    source = given.source(("a", "00:01", 4))
    view = given.view(source)
    given.insert(source, ("a", "00:02", 5), ("b", "00:03", 6))
    code, out, _ = run("refresh", view)
    assert code == 0
    assert out.startswith(f"refresh {view}: INCREMENTAL 2 changes read, 2 rows written (+1 ~1 -0) in ")
    assert out.endswith(" s\n") and "\r" not in out

    code, out, _ = run("refresh", view, "--full")
    assert out.startswith(f"refresh {view}: FULL (REQUESTED_FULL) ")


def test_refresh_on_a_terminal_redraws_a_progress_line_then_prints_the_result(spark, given):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    source = given.source(("a", "00:01", 4))
    view = given.view(source)
    given.insert(source, *[("a", f"00:{m:02d}", m) for m in range(20)])
    terminal = Terminal()
    assert cli.refresh_views(spark, [view], False, terminal) == (1, 0)
    drawn = terminal.getvalue()
    assert f"| refresh {view} (" in drawn and "\r\033[K" in drawn  # with the phase it is in
    assert drawn.rsplit("\r\033[K", 1)[1].startswith(f"refresh {view}: INCREMENTAL")


def test_a_refresh_reports_each_phase_it_enters_to_whoever_watches(spark, given):
    source = given.source(("a", "00:01", 4))
    view = given.view(source)
    given.insert(source, ("b", "00:02", 5))
    seen = []
    with progress.watching(lambda name, phase: seen.append((name, phase))):
        refresh.refresh(spark, view)
    assert seen == [(view, phase) for phase in progress.PHASES]
    refresh.refresh(spark, view)
    assert len(seen) == len(progress.PHASES)  # no longer watched


def test_spark_ui_describes_each_execution_of_a_refresh_statement_by_its_phase(spark, given):
    source = given.source(("a", "00:01", 4))
    view = given.view(source)
    given.insert(source, ("b", "00:02", 5))
    # Planning runs no execution of its own here: the sources' versions were read before the
    # refresh's session, where it looked for nothing new (refresh._idle), under the caller's description.
    expected = {f"mv refresh {view}: {phase}" for phase in progress.PHASES if phase not in ("planning", "recomputing")}
    marker = execution_marker(spark)
    spark.sparkContext.setLocalProperty("spark.job.description", "the caller's cell")
    try:
        spark.sql(f"REFRESH MATERIALIZED VIEW {view}").collect()
        assert spark.sparkContext.getLocalProperty("spark.job.description") == "the caller's cell"
    finally:
        spark.sparkContext.setLocalProperty("spark.job.description", None)
    deadline = time.monotonic() + 30  # Spark's UI records executions asynchronously
    while not expected <= (described := {e["description"] for e in _executions_since(spark, marker)}) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    assert expected <= described


def test_refresh_due_refreshes_only_the_views_their_schedule_says_are_due(run, given):
    source = given.source(("a", "00:01", 4))
    triggered = given.view(source, "TRIGGER ON UPDATE")
    daily = given.view(source, "SCHEDULE EVERY 1 DAY")
    unscheduled = given.view(source)

    assert run("refresh", "--due")[1] == "nothing is due\n"
    given.insert(source, ("a", "00:02", 5))
    code, out, _ = run("refresh", "--due")
    assert code == 0
    assert [line.split()[1] for line in out.splitlines()] == [f"{triggered}:"]
    assert daily not in out and unscheduled not in out


def test_a_failing_view_is_reported_and_the_others_still_refresh(run, given, spark):
    broken_source, source = given.source(("a", "00:01", 4)), given.source(("a", "00:01", 4))
    broken, fine = given.view(broken_source), given.view(source)
    spark.sql(f"DROP TABLE {broken_source}")
    code, out, _ = run("refresh", "--all")
    assert code == 1
    lines = out.splitlines()
    failed = lines.index(next(line for line in lines if line.startswith(f"refresh {broken}: ")))
    assert lines[failed].startswith(f"refresh {broken}: error [MV_QUERY_NO_LONGER_VALID]: ")
    assert lines[failed + 1].startswith("  hint: ")
    assert any(line.startswith(f"refresh {fine}: INCREMENTAL") for line in lines)


# --- mv scheduler --------------------------------------------------------------------------------

def test_scheduler_once_refreshes_what_is_due_upstream_first_and_survives_a_failing_view(run, given, spark):
    source, broken_source = given.source(("a", "00:01", 4)), given.source(("a", "00:01", 4))
    upstream = given.view(source, "TRIGGER ON UPDATE")
    downstream = given.name("view")
    mv.sql(spark, f"""CREATE MATERIALIZED VIEW {downstream} TRIGGER ON UPDATE
                      AS SELECT item, sum(n) AS n FROM {upstream} GROUP BY item""")
    given.views.append(downstream)
    broken = given.view(broken_source, "TRIGGER ON UPDATE")
    spark.sql(f"DROP TABLE {broken_source}")
    given.insert(source, ("b", "00:02", 5))

    code, out, _ = run("scheduler", "--once")
    lines = [line.split(" ", 1)[1] for line in out.splitlines()]  # without the time stamps
    assert code == 1  # --once reports the failure in its exit code, as `refresh --due` does
    assert lines[0].startswith("scheduler: refreshing due views every 60 s")
    refreshed = [line.split()[1].rstrip(":") for line in lines if "INCREMENTAL" in line or "FULL" in line]
    assert refreshed == [upstream, downstream]
    assert sum(f"refresh {broken}: error [" in line for line in lines) == 1
    assert lines[-1] == "scheduler: stopped"


def test_scheduler_stops_cleanly_on_sigterm(run):
    finished = threading.Event()

    def terminate_until_finished():
        while not finished.wait(0.5):
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.signal(signal.SIGTERM, lambda *_: None)  # a late signal must not end pytest
    try:
        threading.Thread(target=terminate_until_finished, daemon=True).start()
        code, out, _ = run("scheduler", "--interval", "30")
    finally:
        finished.set()
        signal.signal(signal.SIGTERM, before)
    assert code == 0
    assert out.splitlines()[-1].endswith("scheduler: stopped")


# --- mv ls, describe, history, drop and the Python API -------------------------------------------

def test_describe_history_plot_and_drop(run, given, spark, tmp_path):
    source = given.source(("a", "00:01", 4))
    view = given.view(source, "SCHEDULE EVERY 5 MINUTES")
    given.insert(source, ("a", "00:02", 5))
    mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}")

    code, out, _ = run("describe", view)
    assert code == 0 and out.splitlines()[0].split() == ["property", "value"]
    properties = {line.split(None, 1)[0]: line.split(None, 1)[-1] for line in out.splitlines()[2:]}
    assert properties["schedule"] == "SCHEDULE EVERY 5 MINUTES" and properties["last_refresh_id"] == "2"

    code, out, _ = run("history", view, "--plot", tmp_path / "history.png")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[2:4]] == ["1", "2"]
    assert [line.split()[4] for line in out.splitlines()[2:4]] == ["full", "incremental"]
    assert (tmp_path / "history.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    assert run("history", view, "--limit", "1")[1].count("incremental") == 1
    assert run("drop", view)[1] == f"dropped {view}\n"
    assert run("describe", view)[2].startswith("error [MV_VIEW_NOT_FOUND]")


def test_the_python_api_refreshes_describes_and_shows_the_history_of_a_view(given, spark):
    source = given.source(("a", "00:01", 4))
    view = mv.MaterializedView.for_name(spark, given.view(source, "TRIGGER ON UPDATE"))
    given.insert(source, ("b", "00:02", 5))

    outcome = view.refresh()
    assert (outcome.technique, outcome.rows_inserted) == ("incremental", 1)
    assert view.refresh(full=True).reason == "REQUESTED_FULL"
    assert view.describe()["schedule"] == "TRIGGER ON UPDATE"
    assert view.describe()["last_refresh_id"] == "3"
    assert [(r.refresh_id, r.technique) for r in view.history().collect()] == [
        (1, "full"), (2, "incremental"), (3, "full")]
    assert sorted(r.item for r in view.toDF().collect()) == ["a", "b"]

    with pytest.raises(MvError) as error:
        mv.MaterializedView.for_name(spark, "cli_no_such_view")
    assert error.value.error_class == "MV_VIEW_NOT_FOUND"


# --- the installed command, as a process of its own ----------------------------------------------

def mv_process(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MV_HOME": str(tmp_path / "mv_home")}
    return subprocess.run([str(MV), *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


@pytest.mark.slow  # a process of its own: make test-slow
def test_the_installed_command_fails_with_one_error_line_and_exit_code_1_never_a_java_stack_trace(tmp_path):
    done = mv_process("sql", "SELECT 10 DIV (id - 1) FROM range(3)", tmp_path=tmp_path)  # fails in a task
    assert done.returncode == 1 and done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if not line.startswith("WARNING: Using incubator")]
    assert lines[0].startswith("error [DIVIDE_BY_ZERO]: ")  # Spark logs nothing: no "ERROR Executor", no "\tat"
    assert lines[1:] == ["== SQL (line 1, position 8) ==", "SELECT 10 DIV (id - 1) FROM range(3)", " " * 7 + "^" * 15]


@pytest.mark.slow  # two processes of their own: make test-slow
def test_a_second_process_on_the_same_home_is_told_the_metastore_is_in_use_and_how_to_share_it(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time, mv; spark = mv.session(); spark.catalog.databaseExists('default'); "
        "print('open', flush=True); time.sleep(300)")], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, env={**os.environ, "MV_HOME": str(tmp_path / "mv_home")})
    try:
        assert holder.stdout.readline().strip() == "open"
        done = mv_process("ls", tmp_path=tmp_path)
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 1 and done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if not line.startswith("WARNING: Using incubator")]
    assert lines[0].startswith("error [MV_METASTORE_IN_USE]: ") and str(tmp_path / "mv_home") in lines[0]
    assert "SPARK_REMOTE=sc://" in done.stderr  # the way to share it with a running Connect server
    assert not any(line.startswith("\tat ") for line in lines)


@pytest.mark.slow  # a process of its own: make test-slow
def test_the_installed_command_plans_a_deploy_of_the_repositorys_catalog(tmp_path):
    done = mv_process("deploy", "catalog", "--plan", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "mv deploy catalog would:"
    assert lines[1].split()[:2] == ["run", "CREATE"]
    created = [line.split()[1] for line in lines if line.startswith("  create")]
    assert sorted(created) == CATALOG_VIEWS
    assert created.index("hot_items") < created.index("hot_items_peak")
    assert lines[-1].startswith("5 to create, 0 to replace, 0 unchanged.")
    assert not (tmp_path / "mv_home" / "warehouse" / "bids").exists()
