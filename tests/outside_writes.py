"""Writes into a Delta table as another engine would make them: data files and a commit put into the
table's directory and its `_delta_log`, where no rule of this session's extension sees them (it
refuses writes into a view and the tables beside it from Spark, by name or by path).

Example:
    >>> committed_outside(spark, location, rows=spark.table("v").limit(1))          # one row appended
    >>> committed_outside(spark, location, rows=kept, replace=True)                 # the table overwritten
    >>> committed_outside(spark, location, properties={"mv.state": "another"})      # a property set
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession


def committed_outside(spark: SparkSession, location: str, rows: DataFrame | None = None, replace: bool = False,
                      properties: dict[str, str] | None = None) -> None:
    """One commit to the Delta table at `location`: `rows` added (as Parquet files, without
    statistics), every file it had removed first when `replace`, and `properties` set."""
    table = Path(location.removeprefix("file:"))
    log = table / "_delta_log"
    commits = sorted(log.glob("*.json"))
    actions = [json.loads(line) for commit in commits for line in commit.read_text().splitlines() if line]
    now = int(time.time() * 1000)
    written = [{"commitInfo": {"timestamp": now, "operation": "WRITE", "engineInfo": "another engine"}}]
    if properties:
        metadata = [a["metaData"] for a in actions if "metaData" in a][-1]
        metadata["configuration"] = {**metadata.get("configuration", {}), **properties}
        written.append({"metaData": metadata})
    if replace:
        written += [{"remove": {"path": path, "deletionTimestamp": now, "dataChange": True}}
                    for path in _live_files(actions)]
    if rows is not None:
        written += [{"add": {"path": path, "partitionValues": {}, "size": size, "modificationTime": now,
                             "dataChange": True}} for path, size in _parquet_files(spark, rows, table)]
    (log / f"{int(commits[-1].stem) + 1:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in written))


def _live_files(actions: list[dict]) -> list[str]:
    """The data files the log's `actions` leave in the table (no checkpoint: the tests' tables are young)."""
    files: dict[str, bool] = {}
    for action in actions:
        if "add" in action:
            files[action["add"]["path"]] = True
        elif "remove" in action:
            files.pop(action["remove"]["path"], None)
    return list(files)


def _parquet_files(spark: SparkSession, rows: DataFrame, table: Path) -> list[tuple[str, int]]:
    """`rows` written as Parquet files into the table's directory: their names there and sizes."""
    staged = Path(tempfile.mkdtemp(prefix="outside_"))
    rows.coalesce(1).write.mode("overwrite").parquet(str(staged / "rows"))
    placed = []
    for part in sorted((staged / "rows").glob("part-*.parquet")):
        name = f"outside-{uuid.uuid4().hex}.parquet"
        shutil.move(str(part), table / name)
        placed.append((name, (table / name).stat().st_size))
    shutil.rmtree(staged)
    return placed
