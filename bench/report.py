"""RESULTS.md is shared by the benchmarks: each rewrites only its own marked section.

Example:
    >>> rewrite_section(Path("bench/RESULTS.md"), "windows", "Window TVFs vs Spark built-ins", table)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable


class InvalidRun(AssertionError):
    """The run did not measure what it claims to, so its times mean nothing."""


class ResultMismatch(InvalidRun):
    """A view differs from its query recomputed from scratch."""


def rewrite_section(path: Path, name: str, title: str, markdown: str) -> None:
    """Replace the text between `<!-- name:begin -->` and `<!-- name:end -->` (appended under `title` if absent)."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{markdown}\n{end}"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n## {title}\n\n" + block + "\n"
    path.write_text(text)


def add_output_arguments(parser: argparse.ArgumentParser, default_json: Path) -> None:
    """--render (RESULTS.md's section redone from `default_json`) and --json (where a run's JSON goes)."""
    parser.add_argument("--render", action="store_true", help="only redo RESULTS.md's section from the JSON")
    parser.add_argument("--json", type=Path, default=default_json,
                        help="where the run's JSON goes; RESULTS.md is redone only for the default")


def results(args: argparse.Namespace, default_json: Path, run: Callable[[], dict]) -> dict:
    """The benchmark's results: with --render those kept in `default_json`, else `run()`'s, written to --json."""
    if args.render:
        return json.loads(default_json.read_text())
    found = run()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(found, indent=2) + "\n")
    return found


def labelled_runs(args: argparse.Namespace, default_json: Path, run: Callable[[], dict]) -> list[dict]:
    """Every run kept (with --render those in `default_json`), else with `run()`'s added under
    --label (replacing a run of that label) and written to --json, where the runs are kept.

    Example:
        >>> runs = labelled_runs(args, RESULTS_JSON, lambda: run(args.rounds))   # [..., {"label": "stop 65", ...}]
    """
    path = default_json if args.render else args.json
    runs = json.loads(path.read_text())["runs"] if path.exists() else []
    if args.render:
        return runs
    runs = [r for r in runs if r["label"] != args.label] + [run() | {"label": args.label}]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    return runs


def publish(args: argparse.Namespace, default_json: Path, results_md: Path, name: str, title: str,
            markdown: str) -> None:
    """`markdown` printed, and RESULTS.md's section `name` rewritten with it when the results are the
    default JSON's (rendered, or a run written there), not a run kept beside them.

    Example:
        >>> publish(args, RESULTS_JSON, RESULTS_MD, "flink", "Side by side with Flink", markdown(found))
    """
    if args.render or args.json.resolve() == default_json.resolve():
        rewrite_section(results_md, name, title, markdown)
    print(markdown)


def reported(args: argparse.Namespace, default_json: Path, results_md: Path, name: str, title: str,
             measure: Callable[[], Any], markdown: Callable[[Any], str]) -> int:
    """A benchmark's exit code: its results (`measure()`, e.g. `labelled_runs` or `results`)
    published as `markdown` of them (publish), 0; or 1 when the run was invalid (InvalidRun), with
    its reason on stderr and nothing published.

    Example:
        >>> return reported(args, RESULTS_JSON, RESULTS_MD, "fixed_cost", "The fixed cost of a refresh",
        ...                 lambda: labelled_runs(args, RESULTS_JSON, lambda: run(args.rounds)), markdown_table)
    """
    try:
        found = measure()
    except InvalidRun as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    publish(args, default_json, results_md, name, title, markdown(found))
    return 0
