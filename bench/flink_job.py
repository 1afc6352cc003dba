"""The Flink side of bench/flink.py: Nexmark queries as Flink SQL in streaming mode over the exported bids, timed.

Run by .venv-flink's Python (PyFlink, no pyspark here): bench/flink.py writes a job spec (JSON) and
reads back the timings this script writes. One TableEnvironment (one JVM) runs every query
``runs`` times, interleaved (q5, q7, q5, ...). Each run is a streaming job at ``parallelism``
(Flink's defaults otherwise: a local mini-cluster started per job, the hashmap state backend, no
checkpoints) from a filesystem source over the CSV bids (a file per source reader, each in time
order, as a topic's partitions would be) with the view's WATERMARK, into a fresh CSV folder. The
input is bounded: at its end the watermark jumps to the end of time and Flink emits every window.

Times per run: ``job_s``, Flink's net runtime of the job (from its submission to the mini-cluster
until it finished); ``wall_s``, from planning the query to the job's end (with the mini-cluster's
start); ``start_s`` (once), starting the JVM and the TableEnvironment.

Example:
    $ .venv-flink/bin/python bench/flink_job.py /tmp/flink-spec.json     # writes spec["result"]
    >>> run_all(json.loads(Path("/tmp/flink-spec.json").read_text()))
    {'flink': '2.3.0', 'start_s': 5.8, 'runs': [{'query': 'q5', 'run': 1, 'job_s': 9.1, 'wall_s': 17.0}, ...]}
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path


def environment(parallelism: int):
    """A streaming TableEnvironment (its JVM started) at ``parallelism``, in UTC."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = t_env.get_config()
    config.set("parallelism.default", str(parallelism))
    config.set("table.local-time-zone", "UTC")
    return t_env


def source_ddl(name: str, source: dict) -> str:
    """The bids as a Flink table: the CSV's columns, the event time made from epoch milliseconds, the watermark.

    Example:
        >>> source_ddl("bids", {"path": "/data/csv", "columns": [["auction", "BIGINT"], ["date_time_ms", "BIGINT"]],
        ...                     "event_time": "date_time", "millis": "date_time_ms",
        ...                     "watermark": "date_time - INTERVAL '10' MINUTES"})
        "CREATE TEMPORARY TABLE bids (auction BIGINT, date_time_ms BIGINT, date_time AS TO_TIMESTAMP_LTZ(date_time_ms, 3), ...
    """
    columns = ", ".join(f"{column} {kind}" for column, kind in source["columns"])
    return (f"CREATE TEMPORARY TABLE {name} ({columns}, "
            f"{source['event_time']} AS TO_TIMESTAMP_LTZ({source['millis']}, 3), "
            f"WATERMARK FOR {source['event_time']} AS {source['watermark']}) "
            f"WITH ('connector' = 'filesystem', 'path' = '{source['path']}', 'format' = 'csv')")


def run_query(t_env, name: str, sql: str, output: str) -> dict:
    """Run ``sql`` once as a streaming job into a fresh CSV folder ``output``; its times in seconds."""
    from pyflink.table import TableDescriptor

    shutil.rmtree(output, ignore_errors=True)
    sink = TableDescriptor.for_connector("filesystem").option("path", output).format("csv").build()
    started = time.perf_counter()
    result = t_env.sql_query(sql).execute_insert(sink)
    result.wait()
    wall = time.perf_counter() - started
    net_ms = result.get_job_client().get_job_execution_result().result().get_net_runtime()
    return {"query": name, "job_s": round(net_ms / 1000, 3), "wall_s": round(wall, 3)}


def run_all(spec: dict) -> dict:
    """Every query of ``spec`` ``spec['runs']`` times, interleaved; the timings and versions."""
    from pyflink.java_gateway import get_gateway
    from pyflink.version import __version__

    started = time.perf_counter()
    t_env = environment(spec["parallelism"])
    start_s = time.perf_counter() - started
    t_env.execute_sql(source_ddl(spec["source"]["name"], spec["source"]))
    runs = []
    for run in range(1, spec["runs"] + 1):
        for name, query in spec["queries"].items():
            runs.append({**run_query(t_env, name, query["sql"], query["output"]), "run": run})
            print(f"  flink {name} run {run}: job {runs[-1]['job_s']:.1f} s, with the mini-cluster's start "
                  f"{runs[-1]['wall_s']:.1f} s", flush=True)
    java = get_gateway().jvm.java.lang.System.getProperty("java.version")
    return {"flink": __version__, "java": java, "parallelism": spec["parallelism"], "start_s": round(start_s, 3),
            "runs": runs}


def main(argv: list[str]) -> int:
    """Read the spec at argv[0], run it, write the timings where it says."""
    spec = json.loads(Path(argv[0]).read_text())
    Path(spec["result"]).write_text(json.dumps(run_all(spec), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
