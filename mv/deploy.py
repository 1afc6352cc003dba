"""Applying a catalog folder: the *.sql files under it declare sources and materialized views.

A file holds one CREATE MATERIALIZED VIEW, or sources as plain Spark SQL that can run again
(CREATE TABLE IF NOT EXISTS ..., CREATE OR REPLACE ...); statements are separated by `;`.
A deploy runs the sources' statements, then for each view, upstream views first: creates it if
it is missing, replaces it if its stored definition differs from the file's, and otherwise leaves
it alone. Formatting, comments and keyword case do not count as a difference. Everything is read
and checked before anything changes.

Example:
    >>> changes = deploy.plan(spark, "catalog/")
    >>> [(change.action, change.name) for change in changes.views]
    [('create', 'hourly_bids'), ('unchanged', 'hot_auctions')]
    >>> for action, name, message in deploy.apply(spark, changes):
    ...     print(action, name, message)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from pyspark.sql import SparkSession

from mv import catalog, commands, dependencies, errors, schedule, statements
from mv.statements import Create, Definition, SparkSql, tokenize


@dataclass(frozen=True)
class Source:
    """A plain Spark SQL statement of a catalog file, run on every deploy."""
    file: Path
    text: str


@dataclass(frozen=True)
class Declared:
    """A materialized view as a catalog file declares it."""
    file: Path
    definition: Definition


@dataclass(frozen=True)
class Change:
    """What deploy does to one view: create, replace or unchanged; and for replace, what differs."""
    action: str
    declared: Declared
    differences: tuple[tuple[str, str | None, str | None], ...] = ()

    @property
    def name(self) -> str:
        return self.declared.definition.name


@dataclass(frozen=True)
class Plan:
    folder: Path
    sources: list[Source]
    views: list[Change]  # in dependency order


def split(text: str) -> list[str]:
    """The statements of a SQL script: split at each `;` outside strings, quoted names and comments."""
    pieces, start = [], 0
    for token in tokenize(text) + [statements.Token("symbol", ";", len(text), len(text))]:
        if token.kind == "symbol" and token.text == ";":
            words = tokenize(text[start:token.start])
            if words:  # not just comments; the statement starts at its first word
                pieces.append(text[start + words[0].start:token.start].strip())
            start = token.end
    return pieces


def read(folder: str | Path) -> tuple[list[Source], list[Declared]]:
    """Every statement of every *.sql file under `folder` (sorted by path), checked to be declarative."""
    root = Path(folder)
    if not root.is_dir():
        raise errors.catalog_not_found(str(folder), "is not a folder")
    files = sorted(root.rglob("*.sql"))
    if not files:
        raise errors.catalog_not_found(str(folder), "has no .sql files")
    sources, views = [], []
    for file in files:
        declared = []
        for text in split(file.read_text()):
            statement = statements.parse(text)
            if isinstance(statement, Create):
                declared.append(Declared(file, statement.definition))
            elif isinstance(statement, SparkSql) and _repeatable(text):
                sources.append(Source(file, text))
            else:
                raise errors.catalog_statement(str(file), text)
        if len(declared) > 1:
            raise errors.catalog_views_per_file(str(file), [d.definition.name for d in declared])
        views += declared
    _check_unique(views)
    return sources, views


def _repeatable(text: str) -> bool:
    """CREATE ... IF NOT EXISTS or CREATE OR REPLACE ...: statements a second deploy can run again."""
    words = [t.text.upper() for t in tokenize(text)[:8]]
    if not words or words[0] != "CREATE":
        return False
    return words[1:3] == ["OR", "REPLACE"] or any(words[i:i + 3] == ["IF", "NOT", "EXISTS"] for i in range(8))


def _check_unique(views: list[Declared]) -> None:
    seen: dict[str, Declared] = {}
    for view in views:
        key = view.definition.name.lower()
        if key in seen:
            raise errors.catalog_duplicate_view(view.definition.name, [str(seen[key].file), str(view.file)])
        seen[key] = view


def plan(spark: SparkSession, folder: str | Path) -> Plan:
    """What a deploy of `folder` would do; changes nothing."""
    sources, views = read(folder)
    for view in views:
        if view.definition.schedule:
            schedule.parse(view.definition.schedule)  # a bad CRON fails the deploy, not the scheduler
    names = [v.definition.name for v in views]
    by_name = {v.definition.name: v for v in views}
    reads = {v.definition.name: dependencies.upstream(spark, v.definition.query, names) for v in views}
    return Plan(Path(folder), sources, [_change(spark, by_name[name]) for name in dependencies.order(reads)])


def _change(spark: SparkSession, declared: Declared) -> Change:
    action, found = catalog.compare(spark, declared.definition)
    return Change(action, declared, found)


def apply(spark: SparkSession, planned: Plan) -> Iterator[tuple[str, str, str]]:
    """Carry out `planned`, yielding (action, name, what happened) as each step is done."""
    for source in planned.sources:
        spark.sql(source.text)
        yield "ran", one_line(source.text), str(source.file)
    for change in planned.views:
        if change.action == "unchanged":
            yield "unchanged", change.name, ""
            continue
        statement = Create(change.declared.definition, or_replace=change.action == "replace")
        status = commands.create(spark, statement)[0]  # "created <name>: <n> rows"
        rows = re.search(r": (\d+) rows$", status)
        done = {"create": "created", "replace": "replaced"}[change.action]
        yield done, change.name, f"{int(rows.group(1)):,} rows" if rows else status


def one_line(text: str, width: int = 72) -> str:
    """`text` on one line, cut at `width` characters."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[:width - 3] + "..."
