"""The JVM's class archive: the classes a session loads (Spark, Hive's metastore, Delta, the
extension), kept once in a class-data-sharing archive so that each new embedded session maps them
instead of finding, parsing and verifying 20,000-30,000 classes again.

A process that starts, refreshes once and stops (`mv refresh` from cron, any CLI command) spent a
third of its time loading classes: at 10M rows, a 1% change's `mv refresh` took 28.6 s from start
to exit (the statement 16.9 s, against 3.6 s in a warm process), 9.4 s of it in class loading;
21.1 s from the archive (bench/RESULTS.md, "A refresh in a new process"). The archive is made
once (`make setup`, or `class_archive.main()`) by a short workload in a throwaway home whose JVM
writes what it loaded when it exits (Java's dynamic archive, `-XX:ArchiveClassesAtExit`);
`mv.session()` then starts its JVM with `-XX:SharedArchiveFile`.
The archive is named for what it must match: the java binary, pyspark's jars (their folder,
names, sizes and times: the JVM checks the class path it recorded), Spark's conf folder, Delta's
and the extension's jars; another combination has no archive and starts as before. (Named without
the folder, a second checkout's virtual environment found the first one's archive, which its JVM
refused: CI's clean clone beside a working copy, at stop 68.)
A JVM that cannot use an archive ignores it, silently: the archive only makes a start faster.
MV_CLASS_ARCHIVE=0 leaves it out.

Example:
    $ python -c "from mv import class_archive; class_archive.main()"   # made once; prints its path
    >>> java_options()                 # what mv.session() adds to spark.driver.extraJavaOptions
    '-XX:SharedArchiveFile=/root/.cache/mv/classes/classes-3f2a....jsa -Xshare:auto -Xlog:cds=off ...'
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mv import config, jars

# The JVM reports an archive it cannot use (another build, other jars) on stdout unless told not to.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# Archives kept (about 230 MB each): one per Spark line a machine runs (make setup-compat makes three).
KEPT = 3
# The workload that makes the archive: about a minute, a JVM's start and exit included.
TRAIN_TIMEOUT_S = 600
# How a process runs this module's main (not `python -m`, which finds it already imported by mv).
ENTRY = "from mv import class_archive; raise SystemExit(class_archive.main())"


def enabled() -> bool:
    """False when MV_CLASS_ARCHIVE=0: sessions start without the archive, and none is made."""
    return os.environ.get("MV_CLASS_ARCHIVE", "1") != "0"


def path() -> Path:
    """Where the archive for this java, this pyspark and these jars is (or would be)."""
    digest = hashlib.sha256()
    java = shutil.which(jars._java()) or jars._java()
    parts = [os.path.realpath(java), os.environ.get("SPARK_CONF_DIR", ""), os.environ.get("SPARK_HOME", ""),
             str(jars.extension_jar_path())]
    parts += [str(j) for j in jars.delta_jars(fetch=False) or []]
    # The JVM's class path, as the archive recorded it: pyspark's jars by their folder (another
    # virtual environment's, with the same jars, is another class path) and by name, size and time
    # (the JVM refuses an archive whose jars changed).
    folder = jars.pyspark_jars_dir()
    parts.append(str(folder))
    for jar in sorted(folder.glob("*.jar")):
        found = jar.stat()
        parts.append(f"{jar.name}:{found.st_size}:{found.st_mtime_ns}")
    digest.update("\n".join(parts).encode())
    return config.cache_dir() / "classes" / f"classes-{digest.hexdigest()[:16]}.jsa"


def java_options() -> str:
    """The JVM options that start a session from the archive: empty when there is none (or
    MV_CLASS_ARCHIVE=0)."""
    archive = path() if enabled() else None
    return f"-XX:SharedArchiveFile={archive} -Xshare:auto {QUIET}" if archive and archive.exists() else ""


def build(force: bool = False) -> Path | None:
    """Make the archive unless it exists: the training workload (`_train`) in a child process and a
    throwaway home; the archive its JVM writes on exit is moved into place only once that JVM has
    exited cleanly, so a session never maps a partly written one (which crashes the JVM). None if
    the JVM could not make one (the reason on stderr); the engine works as before without it."""
    final = path()
    if final.exists() and not force:
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mv-classes-") as home:
        partial = Path(home) / "classes.jsa"
        env = {**os.environ, "MV_HOME": str(Path(home) / "home"), "MV_CLASS_ARCHIVE": "0"}
        env.pop("SPARK_REMOTE", None)
        started = time.monotonic()
        child = subprocess.run([sys.executable, "-c", ENTRY, "--train", str(partial)], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TRAIN_TIMEOUT_S)
        if child.returncode != 0 or not partial.exists() or partial.stat().st_size == 0:
            print(f"class archive not made (exit {child.returncode}); sessions start without one:\n"
                  f"{child.stdout[-2000:]}", file=sys.stderr)
            return None
        part = final.with_suffix(".part")  # moved whole, then renamed: never a partial archive under its name
        shutil.move(partial, part)
        os.replace(part, final)
        print(f"class archive made in {time.monotonic() - started:.0f} s", file=sys.stderr)
    for stale in sorted(final.parent.glob("classes-*.jsa"), key=lambda a: a.stat().st_mtime)[:-KEPT]:
        stale.unlink(missing_ok=True)  # another pyspark's or java's, older than the last KEPT made
    return final


def _train(archive: str) -> int:
    """The workload whose classes the archive keeps (run in its own process, a throwaway home):
    a Delta source with its change feed, a windowed aggregate and a view of rows created,
    refreshed incrementally after inserts, updates and deletes, and in full, then read. Its
    JVM writes the archive when it exits, which this process waits for."""
    from mv.session import session

    base = config.spark_defaults().get("spark.driver.extraJavaOptions", "")
    spark = session(conf={"spark.driver.extraJavaOptions": f"{base} -XX:ArchiveClassesAtExit={archive} {QUIET}",
                          "spark.app.name": "mv-class-archive"})
    for statement in TRAINING:
        rows = spark.sql(statement)
        if rows is not None:
            rows.collect()
    jvm = spark.sparkContext._gateway.proc
    spark.stop()
    spark.sparkContext._gateway.shutdown()
    jvm.stdin.close()  # the JVM exits on EOF, writing the archive first
    return jvm.wait(timeout=TRAIN_TIMEOUT_S)


TRAINING = [
    "CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP) USING delta",
    "INSERT INTO bids SELECT id % 50, id % 97, TIMESTAMP '2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) "
    "FROM range(2000)",
    "CREATE MATERIALIZED VIEW per_minute REFRESH POLICY INCREMENTAL AS SELECT auction, window_start, window_end, "
    "count(*) AS bids, sum(price) AS total, max(price) AS top "
    "FROM TUMBLE(TABLE(bids), DESCRIPTOR(ts), INTERVAL '1' MINUTE) GROUP BY auction, window_start, window_end",
    "CREATE MATERIALIZED VIEW dear REFRESH POLICY INCREMENTAL AS SELECT auction, price, ts FROM bids WHERE price > 90",
    "INSERT INTO bids SELECT id % 50, id % 89, TIMESTAMP '2026-01-01 00:30:00' + make_interval(0, 0, 0, 0, 0, 0, id) "
    "FROM range(500)",
    "UPDATE bids SET price = price + 1 WHERE auction = 7",
    "DELETE FROM bids WHERE auction = 8",
    "REFRESH MATERIALIZED VIEW per_minute",
    "REFRESH MATERIALIZED VIEW dear",
    "REFRESH MATERIALIZED VIEW per_minute FULL",
    "SELECT auction, sum(bids) FROM per_minute GROUP BY auction",
    "SHOW MATERIALIZED VIEWS",
]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--train"]:
        return _train(args[1])
    if not enabled():
        print("class archive: none (MV_CLASS_ARCHIVE=0)")
        return 0
    archive = build(force="--force" in args)
    print("class archive:", archive or "none (sessions start without one)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
