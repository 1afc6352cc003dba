"""The `mv` command: statements, catalog deploys, refreshes and the scheduler, from a shell.

    mv sql "STATEMENT" | -f FILE.sql           mv deploy DIR [--plan]
    mv refresh NAME... | --all | --due [--full]
    mv scheduler [--interval SECONDS] [--once]
    mv ls | describe NAME | history NAME [--plot FILE.png] [--limit N] | drop NAME | demo

It works on the active SparkSession when there is one (a notebook, a test), else on mv.session().
A failure prints `error [ERROR_CLASS]: message` and a `hint:` line and exits with 1 (2 for a
wrong command line); --verbose adds the causes. Java stack traces are never printed.

Example:
    $ mv deploy catalog/ --plan
    $ mv refresh --due          # from cron, Airflow or a Databricks job
    >>> from mv.cli import main
    >>> main(["sql", "SHOW MATERIALIZED VIEWS"])
    0
"""
from __future__ import annotations

import argparse
import difflib
import os
import re
import signal
import sys
import threading
import traceback
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import TextIO

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from mv import (api, catalog, chart, commands, config, console, deploy, dependencies, errors, history, refresh,
                schedule, statements)
from mv.errors import MvError
from mv.query import utc_datetime


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]); returns the exit code."""
    out, err = sys.stdout, sys.stderr
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            args.parser.error("choose a command")
        args.check(args)
    except SystemExit as exit_:  # argparse: --help, or a wrong command line
        return int(exit_.code or 0)
    own = SparkSession.getActiveSession() is None
    try:
        return args.run(args, out)
    except KeyboardInterrupt:
        print("error: interrupted", file=err)
        return 130
    except Exception as error:  # noqa: BLE001 - every failure becomes one line and an exit code
        print("\n".join(describe_error(error, verbose=args.verbose)), file=err)
        return 1
    finally:
        active = SparkSession.getActiveSession()
        if own and active is not None:
            active.stop()


def _spark() -> SparkSession:
    """The active session, else the embedded one, started quiet: the CLI reports errors itself."""
    import mv
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    spark = mv.session()
    if "MV_LOG_LEVEL" not in os.environ:
        _silence_logs(spark)
    try:
        spark.catalog.databaseExists("default")  # opens the metastore now, to say plainly if it is taken
    except Exception as error:  # noqa: BLE001 - Hive reports it as "Unable to instantiate ...Client"
        if "SessionHiveMetaStoreClient" in str(error):
            raise errors.metastore_in_use(str(config.home_dir())) from None
        raise
    return spark


def _silence_logs(spark: SparkSession) -> None:
    # Spark would log a failed task or a metastore problem again, Java stack trace and all; the
    # loggers conf/log4j2.properties names have levels of their own, so set every logger's.
    try:
        log4j = spark.sparkContext._jvm.org.apache.logging.log4j
        log4j.core.config.Configurator.setAllLevels(log4j.LogManager.ROOT_LOGGER_NAME, log4j.Level.OFF)
    except Exception:  # noqa: BLE001 - no JVM here (Spark Connect): its server keeps its logs
        pass


# ---- command line -------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mv", description="Windowed materialized views on Delta Lake.")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the causes of an error")
    parser.set_defaults(command=None, parser=parser, check=lambda args: None)
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    commands_ = parser.add_subparsers(title="commands", metavar="COMMAND")

    def command(name: str, run, help_: str) -> argparse.ArgumentParser:
        sub = commands_.add_parser(name, help=help_, description=help_, parents=[verbose])
        sub.set_defaults(command=name, run=run, parser=sub)
        return sub

    sql = command("sql", _sql, "run statements: materialized-view ones and plain Spark SQL")
    given = sql.add_mutually_exclusive_group(required=True)
    given.add_argument("statement", nargs="?", help="statements, separated by ;")
    given.add_argument("-f", "--file", type=argparse.FileType("r"), help="a file of statements")
    sql.add_argument("--max-rows", type=int, default=1000, help="rows to print per result (1000)")

    dep = command("deploy", _deploy, "create or replace the views declared under DIR, upstream first")
    dep.add_argument("dir", help="the catalog folder, e.g. catalog/")
    dep.add_argument("--plan", action="store_true", help="only print what would change")

    ref = command("refresh", _refresh, "refresh views, upstream first")
    ref.add_argument("names", nargs="*", metavar="NAME")
    ref.add_argument("--all", action="store_true", help="every materialized view")
    ref.add_argument("--due", action="store_true", help="the views their SCHEDULE or TRIGGER says are due")
    ref.add_argument("--full", action="store_true", help="recompute in full")
    ref.set_defaults(check=_check_refresh)

    sch = command("scheduler", _scheduler, "refresh due views until stopped (SIGTERM, Ctrl-C)")
    sch.add_argument("--interval", type=float, default=60.0, help="seconds between checks (60)")
    sch.add_argument("--once", action="store_true", help="check once and exit")

    command("ls", _ls, "list the views and their last refresh")
    desc = command("describe", _describe, "a view's definition and last refresh")
    desc.add_argument("name")
    hist = command("history", _history, "a view's refresh history")
    hist.add_argument("name")
    hist.add_argument("--limit", type=int, default=20, help="latest refreshes to show (20)")
    hist.add_argument("--plot", metavar="FILE.png", help="also draw duration, rows written and watermark lag")
    drop = command("drop", _drop, "drop a view and its late-row and open-window tables")
    drop.add_argument("name")
    drop.add_argument("--if-exists", action="store_true")
    command("demo", _demo, "the demo: window functions on a day of generated bids")
    return parser


def _check_refresh(args: argparse.Namespace) -> None:
    if sum([bool(args.names), args.all, args.due]) != 1:
        args.parser.error("give view names, --all or --due (one of them)")


# ---- commands -----------------------------------------------------------------------------------

def _sql(args: argparse.Namespace, out: TextIO) -> int:
    pieces = deploy.split(args.file.read() if args.file else args.statement)
    for piece in pieces:
        statements.parse(piece)  # the materialized-view statements' syntax, before anything runs
    spark = _spark()
    for i, piece in enumerate(pieces):
        frame = commands.sql(spark, piece)
        if frame.columns:
            print(("\n" if i else "") + console.frame_table(frame, args.max_rows), file=out, flush=True)
    return 0


def _deploy(args: argparse.Namespace, out: TextIO) -> int:
    spark = _spark()
    planned = deploy.plan(spark, args.dir)
    if args.plan:
        print(plan_text(planned), file=out)
        return 0
    done: Counter = Counter()
    for action, name, detail in deploy.apply(spark, planned):
        print(f"{action:<9}  {name}" + (f"  ({detail})" if detail else ""), file=out, flush=True)
        done[action] += 1
    print(f"deployed {args.dir}: {done['created']} created, {done['replaced']} replaced, "
          f"{done['unchanged']} unchanged", file=out)
    return 0


def _refresh(args: argparse.Namespace, out: TextIO) -> int:
    spark = _spark()
    names = args.names or catalog.list_views(spark)  # named views that do not exist fail before any refresh
    due_at = schedule.now_utc() if args.due else None
    refreshed, failed = refresh_views(spark, names, args.full, out, due_at=due_at, hints=True)
    if due_at is not None and not refreshed and not failed:
        print("nothing is due", file=out)
    return 1 if failed else 0


def _scheduler(args: argparse.Namespace, out: TextIO) -> int:
    spark = _spark()
    stop = threading.Event()
    handlers = _on_signals(lambda *_: stop.set())
    console.log(out, f"scheduler: refreshing due views every {args.interval:g} s (SIGTERM or Ctrl-C stops it)")
    failed = 0
    try:
        while not stop.is_set():
            try:
                failed += refresh_views(spark, catalog.list_views(spark), False, out,
                                        due_at=schedule.now_utc(), stop=stop, stamp=True)[1]
            except Exception as error:  # noqa: BLE001 - e.g. the metastore was briefly unreachable
                console.log(out, "scheduler: " + describe_error(error)[0])
            if args.once or stop.wait(args.interval):
                break
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
    console.log(out, "scheduler: stopped")
    return 1 if args.once and failed else 0


def _on_signals(handler) -> dict:
    """Let SIGTERM and SIGINT call `handler` (the refresh under way finishes); returns the old handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {number: signal.signal(number, handler) for number in (signal.SIGTERM, signal.SIGINT)}


def _ls(args: argparse.Namespace, out: TextIO) -> int:
    spark = _spark()
    last = api.latest_refreshes(spark)
    rows = []
    for name in catalog.list_views(spark):
        view, r = catalog.load(spark, name), last.get(name.lower())
        rows.append((name, view.definition.schedule if view else None,
                     _utc(r.started_us) if r else "never", r.technique if r else None,
                     r.reason if r else None, f"{r.duration_s:.1f}" if r else None))
    if not rows:
        print("no materialized views", file=out)
        return 0
    print(console.table(["view", "schedule", "last refresh (UTC)", "technique", "reason", "seconds"], rows,
                right=[False] * 5 + [True]), file=out)
    return 0


def _describe(args: argparse.Namespace, out: TextIO) -> int:
    rows = commands.describe_view(_spark(), args.name, extended=True)
    print(console.table(["property", "value"], rows), file=out)
    return 0


def _history(args: argparse.Namespace, out: TextIO) -> int:
    spark = _spark()
    view = api.MaterializedView.for_name(spark, args.name)
    frame = history.of_view(spark, view.name, newest=args.limit)
    frame = frame.withColumn("started_us", F.unix_micros("started_at"))
    rows = list(reversed(frame.orderBy(F.desc("started_at"), F.desc("refresh_id")).limit(args.limit).collect()))
    shown = [(r.refresh_id, _utc(r.started_us), f"{r.duration_s:.1f}", r.technique, r.reason, r.rows_read,
              r.rows_inserted, r.rows_updated, r.rows_deleted, r.late_rows,
              (_utc(r.watermark_micros) + (" (idle)" if r.watermark_idle else "")) if r.watermark_micros is not None
              else None, _estimated(r)) for r in rows]
    header = ["id", "started (UTC)", "seconds", "technique", "reason", "read", "inserted", "updated",
              "deleted", "late", "watermark (UTC)", "estimated (s)"]
    print(console.table(header, shown, right=[h not in ("started (UTC)", "technique", "reason") for h in header])
          if shown else f"{view.name} has no refreshes in its history", file=out)
    if args.plot:
        print(f"chart: {chart.plot_history(view.name, rows, args.plot)}", file=out)
    return 0


def _estimated(row) -> str | None:
    """`mv history`'s last column: AUTO's estimate of the refresh in seconds, incrementally/in full."""
    if row.estimated_incremental_s is None or row.estimated_full_s is None:
        return None
    return f"{row.estimated_incremental_s:.1f}/{row.estimated_full_s:.1f}"


def _drop(args: argparse.Namespace, out: TextIO) -> int:
    print(commands.drop(_spark(), args.name, if_exists=args.if_exists)[0], file=out)
    return 0


def _demo(args: argparse.Namespace, out: TextIO) -> int:
    from mv import demo
    demo.main()
    return 0


# ---- refreshing ---------------------------------------------------------------------------------

def refresh_views(spark: SparkSession, names: list[str], full: bool, out: TextIO, *,
                  due_at: datetime | None = None, stop: threading.Event | None = None,
                  stamp: bool = False, hints: bool = False) -> tuple[int, int]:
    """Refresh `names` one at a time, upstream views first; with `due_at`, only those due then.

    Each view is checked when its turn comes, so a view triggered by an upstream view's update
    refreshes in the same pass. A failing view is reported and the others go on.
    Returns (refreshed, failed).
    """
    views = {name: catalog.require(spark, name) for name in names}
    reads = {name: dependencies.upstream(spark, view.definition.query, names) for name, view in views.items()}
    last = api.latest_refreshes(spark) if due_at is not None else {}
    done: set[str] = set()  # refreshed in this pass: the engine need not refresh them again as upstream
    refreshed = failed = 0
    for name in dependencies.order(reads):
        if stop is not None and stop.is_set():
            break
        try:
            started = last.get(name.lower())
            if due_at is not None and not schedule.due(spark, views[name], due_at,
                                                       utc_datetime(started.started_us) if started else None):
                continue
            with console.Progress(spark, name, out):
                outcome = refresh.refresh(spark, name, full=full, refreshed=done)
            done.add(dependencies.qualify(spark, name))
            console.log(out, console.outcome_line(outcome), stamp)
            refreshed += 1
        except Exception as error:  # noqa: BLE001 - one failing view must not stop the others
            lines = describe_error(error)
            console.log(out, f"refresh {name}: {lines[0]}", stamp)
            if hints and len(lines) > 1 and lines[-1].startswith("hint:"):
                print(f"  {lines[-1]}", file=out)
            failed += 1
    return refreshed, failed


# ---- output -------------------------------------------------------------------------------------

def plan_text(planned: deploy.Plan) -> str:
    """What `mv deploy --plan` prints: each step, and for a replaced view the fields that differ."""
    lines = [f"mv deploy {planned.folder} would:"]
    width = max([len(change.name) for change in planned.views] + [0])
    for source in planned.sources:
        lines.append(f"  {'run':<9}  {deploy.one_line(source.text)}  ({_relative(source.file, planned.folder)})")
    for change in planned.views:
        file = _relative(change.declared.file, planned.folder)
        lines.append(f"  {change.action:<9}  {change.name:<{width}}  ({file})")
        for field, old, new in change.differences:
            lines += [f"      {line}" for line in _difference(field, old, new)]
    counts = Counter(change.action for change in planned.views)
    lines.append(f"{counts['create']} to create, {counts['replace']} to replace, {counts['unchanged']} unchanged. "
                 "Nothing was changed; run without --plan to apply.")
    return "\n".join(lines)


def _difference(field: str, old: str | None, new: str | None) -> list[str]:
    if old is not None and new is not None and (len(old) > 60 or len(new) > 60 or "\n" in old + new):
        diff = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1)
        return [f"{field}:"] + [f"  {line}" for line in diff if not line.startswith(("---", "+++"))]
    return [f"{field}: {old if old is not None else '(none)'} -> {new if new is not None else '(none)'}"]


def _relative(path: Path, folder: Path) -> str:
    try:
        return str(path.relative_to(folder))
    except ValueError:
        return str(path)


def _utc(micros: int) -> str:
    return utc_datetime(micros).strftime("%Y-%m-%d %H:%M:%S")


# ---- errors -------------------------------------------------------------------------------------

def describe_error(error: BaseException, verbose: bool = False) -> list[str]:
    """`error [CLASS]: message`, the statement fragment if it points at one, `hint: ...`; and with
    `verbose`, the whole message and the causes. Never a Java stack trace."""
    cls, message, pointer, hint = _parts(error)
    lines = [f"error [{cls}]: {message}"] + pointer
    if verbose:
        lines += _details(error, [message] + pointer)
    return lines + ([f"hint: {hint}"] if hint else [])


def _parts(error: BaseException) -> tuple[str, str, list[str], str | None]:
    """Error class, first line of the message, the pointer at the statement (if any), the hint."""
    if isinstance(error, MvError):
        first, *context = str(error).split("\n")
        message = first.removeprefix(f"[{error.error_class}] ").removesuffix(f" Hint: {error.hint}")
        return error.error_class, message, context, error.hint
    java = getattr(error, "java_exception", None)  # a Java error PySpark did not convert: its own line only
    if java is not None:
        return str(java.getClass().getSimpleName()), str(java.getMessage()).split("\n")[0], [], None
    condition = _condition(error)
    text = error.getMessage() if hasattr(error, "getMessage") else str(error)
    first = next((line for line in str(text).split("\n") if line.strip()), type(error).__name__)
    message = re.sub(r"\s*SQLSTATE: \w+.*$", "", first.removeprefix(f"[{condition}] ")).strip()
    return condition or type(error).__name__, message, _spark_pointer(str(error)), None


def _condition(error: BaseException) -> str | None:
    try:
        return error.getCondition() if hasattr(error, "getCondition") else None
    except Exception:  # noqa: BLE001 - an error without a class
        return None


def _spark_pointer(text: str) -> list[str]:
    """Spark's "== SQL (line 1, position 8) ==" block: the statement line and the ^^^ under it."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("== SQL")), None)
    if start is None:
        return []
    block = [lines[start]]
    for line in lines[start + 1:]:
        block.append(line)
        if line.strip().startswith("^"):
            break
    return block


def _details(error: BaseException, shown: list[str]) -> list[str]:
    """The rest of the message, then each cause; Python frames only for errors of no known kind."""
    details = [line for line in _clean(str(error))
               if line.strip() and line not in shown[1:] and shown[0] not in line]
    seen, cause = {id(error)}, _cause(error)
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        cls, message, _, _ = _parts(cause)
        details.append(f"caused by [{cls}]: {message}")
        cause = _cause(cause)
    if not isinstance(error, MvError) and _condition(error) is None and not hasattr(error, "java_exception"):
        details += [line for chunk in traceback.format_exception(error) for line in chunk.rstrip().split("\n")]
    return [f"  {line}" for line in details]


def _cause(error: BaseException) -> BaseException | None:
    if error.__cause__ is not None:
        return error.__cause__
    if error.__context__ is not None and not error.__suppress_context__:
        return error.__context__
    cause = getattr(error, "_cause", None)  # PySpark's converted cause of a Java error
    return cause if isinstance(cause, BaseException) else None


def _clean(text: str) -> list[str]:
    """Lines of `text` without Java stack frames."""
    return [line for line in text.split("\n")
            if not re.match(r"\s+(at [\w$.<>/]+\(.*\)|\.\.\. \d+ more)\s*$", line)
            and not line.lstrip().startswith(("Suppressed:", "JVM stacktrace"))]


if __name__ == "__main__":
    sys.exit(main())
