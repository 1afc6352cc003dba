"""Table names, parsed once into a value that renders itself as valid SQL.

A name comes in as the user wrote it (`daily`, `db.daily`, `` `select` ``, `` db.`123v` ``) or as
Spark's analysed plan names a source (`` `spark_catalog`.`default`.`bids` ``). `TableName.parse`
splits it into its parts, backticks removed; the value is a `str` whose text is the parts joined
by dots, each quoted only where SQL needs it (a part that is not a plain identifier, or is one of
Spark's reserved words). So the text is readable where it is shown, the same for a name however it
was written, and valid wherever it is pasted into SQL. The tables beside a view (`<view>__late`,
`<view>__open`) are derived from the parts, never by appending to SQL text.

Example:
    >>> name = TableName.parse("db.`select`")
    >>> name, name.parts, name.late
    ('db.`select`', ('db', 'select'), 'db.select__late')
    >>> f"SELECT * FROM {name}"
    'SELECT * FROM db.`select`'
"""
from __future__ import annotations

import re

from mv import errors

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PART = re.compile(r"\s*(?:`((?:[^`]|``)*)`|([^.`\s]+))\s*")
# Spark's reserved words (`sql_keywords()` with spark.sql.ansi.enforceReservedKeywords): a table part
# spelled like one must be quoted even where Spark's default mode would accept some of them.
RESERVED = frozenset("""
    all and any as authorization both call case cast check collate collation collations column constraint
    create cross current_date current_path current_schema current_time current_timestamp current_user
    distinct else end escape except execute false fetch filter for foreign from full grant group having in
    inner intersect into is join lateral leading left natural not null offset on only or order outer
    overlaps primary recursive references right select session_user some sql table then time to trailing
    union unique unknown user using when where with within""".split())


def quote_part(part: str) -> str:
    """One part of a name as SQL: as it is when it is a plain identifier, else in backticks."""
    if _PLAIN.match(part) and part.lower() not in RESERVED:
        return part
    return "`" + part.replace("`", "``") + "`"


class TableName(str):
    """A table's name: its parts (catalog, database, table; the last at least) and, as a `str`,
    its SQL text with each part quoted where needed. Build one with `parse` or `of`."""

    parts: tuple[str, ...]

    def __new__(cls, parts: tuple[str, ...]):
        value = super().__new__(cls, ".".join(quote_part(p) for p in parts))
        value.parts = tuple(parts)
        return value

    @classmethod
    def parse(cls, text: str) -> TableName:
        """The name `text` spells, in SQL's syntax (parts separated by dots, any in backticks)."""
        if isinstance(text, TableName):
            return text
        parts, position = [], 0
        while True:
            match = _PART.match(text, position)
            if not match or not (match.group(1) is not None or match.group(2)):
                raise errors.bad_name(text)
            parts.append(match.group(1).replace("``", "`") if match.group(1) is not None else match.group(2))
            position = match.end()
            if position == len(text):
                return cls(tuple(parts))
            if text[position] != ".":
                raise errors.bad_name(text)
            position += 1

    @classmethod
    def of(cls, *parts: str) -> TableName:
        """The name made of these parts, unquoted (`TableName.of("db", "select")`)."""
        return cls(tuple(p for p in parts if p))

    @property
    def table(self) -> str:
        """The last part, unquoted: the table's own name."""
        return self.parts[-1]

    @property
    def database(self) -> str | None:
        """The part before the table, if the name has one."""
        return self.parts[-2] if len(self.parts) > 1 else None

    def beside(self, suffix: str) -> TableName:
        """The table in the same database whose name is this one's and `suffix`."""
        return TableName(self.parts[:-1] + (self.parts[-1] + suffix,))

    @property
    def late(self) -> TableName:
        """Where the view's late rows go (mv/history.py)."""
        return self.beside("__late")

    @property
    def open(self) -> TableName:
        """Where an EMIT ON WINDOW CLOSE view keeps its open windows (mv/open_windows.py)."""
        return self.beside("__open")

    def in_database(self, database: str | None) -> TableName:
        """This name with `database` before the table, unless it names a database already."""
        return self if self.database or not database else TableName((database, self.table))

    def __reduce__(self):  # pickled (e.g. into a worker) as its parts
        return (TableName, (self.parts,))
