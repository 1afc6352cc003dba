"""What one refresh cost: wall-clock seconds, the driver JVM's peak heap, files and bytes read per table.

Peak heap: before the refresh the JVM is asked to collect garbage (System.gc()) and every heap
memory pool's peak is reset (java.lang.management's MemoryPoolMXBean, through py4j); after it, the
pools' peaks are summed. In local mode the driver JVM
also runs the tasks, so this is the whole Spark side's heap; the pools peak at different moments, so
the sum bounds the peak from above, and it counts garbage not yet collected (allocation pressure, not
live data). Files and bytes read come from the scan nodes' metrics ("number of files read", "size of
files read") of every SQL execution the refresh ran, as Spark's status store (the UI's SQL tab) keeps
them; a scan is charged to the table its Location names, so change-feed reads count for the source.

Example:
    >>> cost = measure(spark, lambda: mv.sql(spark, "REFRESH MATERIALIZED VIEW v").collect())
    >>> cost["seconds"], cost["peak_heap_mib"], cost["read"]["bids"]
    (3.2, 812.4, {'files': 3, 'bytes': 1843200})
"""
from __future__ import annotations

import re
import time

from bench.refresh import _scala_dict, _scala_list, _status_store, execution_marker, where_time_went

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
LOCATION = re.compile(r"Location: \w+\(\d+ paths?\)\[([^\],]+)")


def measure(spark, action) -> dict:
    """Run ``action()``; its seconds, the peak heap (MiB), what it read per table and where the time went."""
    # Scans name their Location in plan descriptions cut at this length (100 by default): keep whole paths.
    spark.conf.set("spark.sql.maxMetadataStringLength", "4096")
    pools = _heap_pools(spark)
    spark._jvm.java.lang.System.gc()             # start from live data, not the last refresh's garbage
    for pool in pools:
        pool.resetPeakUsage()
    marker = execution_marker(spark)
    started = time.perf_counter()
    result = action()
    seconds = time.perf_counter() - started
    peak = sum(pool.getPeakUsage().getUsed() for pool in pools)
    spent = where_time_went(spark, marker, seconds) or {}
    return {"seconds": round(seconds, 3), "peak_heap_mib": round(peak / 2**20, 1),
            "read": reads_since(spark, marker), "phases": _phases(spent.get("phases")), "result": result}


def _phases(phases: dict | None) -> dict | None:
    """bench.refresh's phases, a streaming job's micro-batches (described by their run ids) summed as one."""
    if phases is None:
        return None
    merged: dict[str, float] = {}
    for label, seconds in phases.items():
        label = "streaming micro-batches" if "runId = " in label else label
        merged[label] = round(merged.get(label, 0.0) + seconds, 2)
    return dict(sorted(merged.items(), key=lambda kv: -kv[1]))


def _heap_pools(spark) -> list:
    management = spark._jvm.java.lang.management.ManagementFactory
    return [p for p in _java_list(management.getMemoryPoolMXBeans()) if p.getType().toString() == "Heap memory"]


def _java_list(items) -> list:
    return [items.get(i) for i in range(items.size())]


def reads_since(spark, after: int, settle_s: float = 5.0) -> dict[str, dict]:
    """Files and bytes the scans of SQL executions after ``after`` read, per table (the folder their Location names).

    Example:
        >>> reads_since(spark, marker)
        {'bids': {'files': 3, 'bytes': 1843200}, 'q7_incr': {'files': 1, 'bytes': 2210}}
    """
    store = _status_store(spark)
    deadline = time.monotonic() + settle_s
    while True:   # Spark records an execution's end asynchronously; give the last ones a moment
        count = store.executionsCount()
        found = [e for e in _scala_list(store.executionsList(max(0, count - 2000), 2000))
                 if e.executionId() > after]
        if all(e.completionTime().isDefined() for e in found) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    read: dict[str, dict] = {}
    for e in found:
        if "Scan parquet" not in e.physicalPlanDescription() or e.metricValues() is None:
            continue
        values = _scala_dict(e.metricValues())
        seen = set()  # a cached relation read twice in a plan shows its scan twice, with the same metrics
        for node in _scala_list(store.planGraph(e.executionId()).allNodes()):
            if not node.name().startswith("Scan parquet"):
                continue
            found = _scala_list(node.metrics())
            ids = tuple(m.accumulatorId() for m in found)
            if ids in seen:
                continue
            seen.add(ids)
            table = _table(node.desc())
            metrics = {m.name(): values.get(m.accumulatorId(), "0") for m in found}
            into = read.setdefault(table, {"files": 0, "bytes": 0})
            into["files"] += _count(metrics.get("number of files read", "0"))
            into["bytes"] += _bytes(metrics.get("size of files read", "0 B"))
    return read


def _table(desc: str) -> str:
    """The table a scan reads: the last folder of its Location that is not Delta's own."""
    match = LOCATION.search(desc)
    if not match:
        return "unknown"
    parts = [p for p in match.group(1).rstrip("/").split("/") if p not in ("_delta_log", "_change_data")]
    return parts[-1] if parts else "unknown"


def _total(text: str) -> str:
    """A metric's total: its only line, or the first figure of the line after 'total (min, med, max ...)'."""
    lines = text.strip().splitlines()
    return lines[1] if len(lines) > 1 else (lines[0] if lines else "0")


def _count(text: str) -> int:
    match = re.search(r"[\d,]+", _total(text))
    return int(match.group(0).replace(",", "")) if match else 0


def _bytes(text: str) -> int:
    match = re.search(r"([\d.,]+)\s*(B|KiB|MiB|GiB|TiB)", _total(text))
    return round(float(match.group(1).replace(",", "")) * UNITS[match.group(2)]) if match else 0
