"""The materialized-view statements, parsed into plain values; anything else is Spark SQL.

Only the wrapper is parsed here (CREATE ... AS, REFRESH, DROP, SHOW, DESCRIBE, EXPLAIN); the query
after AS is Spark's to parse. CREATE's clauses may come in any order, each at most once:

    CREATE [OR REPLACE] MATERIALIZED VIEW [IF NOT EXISTS] name
      [WATERMARK FOR col AS col - INTERVAL ... [IDLE AFTER INTERVAL ...]]
      [EMIT ON WINDOW CLOSE | EMIT ON UPDATE]
      [GRACE INTERVAL ...] [REFRESH POLICY AUTO | INCREMENTAL [STRICT] | FULL]
      [SCHEDULE EVERY n MINUTES|HOURS|DAYS | SCHEDULE CRON 'expr' [AT TIME ZONE 'tz']
       | TRIGGER ON UPDATE [AT MOST EVERY INTERVAL ...]]
      [PARTITIONED BY (...) | CLUSTER BY (...)] [COMMENT '...'] [TBLPROPERTIES (...)]
    AS query

Example:
    >>> parse("REFRESH MATERIALIZED VIEW hourly FULL")
    Refresh(name='hourly', full=True)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from mv import errors
from mv.names import TableName

_TOKEN = re.compile(r"""
    (?P<space>\s+|--[^\n]*|/\*.*?\*/)
  | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.)*")
  | (?P<word>`[^`]*`|[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>\d+(?:\.\d+)?)
  | (?P<symbol>.)""", re.VERBOSE | re.DOTALL)

# The units of an interval's value (INTERVAL '5' MINUTES), singular and plural.
INTERVAL_UNITS = ("DAY", "DAYS", "HOUR", "HOURS", "MINUTE", "MINUTES", "SECOND", "SECONDS",
                  "MILLISECOND", "MILLISECONDS", "MICROSECOND", "MICROSECONDS")


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int
    end: int

    def is_(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words


@dataclass(frozen=True)
class Definition:
    """What CREATE MATERIALIZED VIEW declares; stored with the view and compared to detect drift."""
    name: str
    query: str
    watermark_column: str | None = None
    watermark_delay: str | None = None
    watermark_idle: str | None = None  # IDLE AFTER INTERVAL ...: the watermark also follows the clock
    emit: str = "UPDATE"
    grace: str | None = None
    policy: str = "AUTO"
    schedule: str | None = None
    partitioned_by: str | None = None
    cluster_by: str | None = None
    comment: str | None = None
    tblproperties: str | None = None


@dataclass(frozen=True)
class Create:
    definition: Definition
    or_replace: bool = False
    if_not_exists: bool = False


@dataclass(frozen=True)
class Refresh:
    name: str
    full: bool = False


@dataclass(frozen=True)
class Drop:
    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class Show:
    pass


@dataclass(frozen=True)
class Describe:
    name: str
    extended: bool = False


@dataclass(frozen=True)
class Explain:
    name: str | None = None
    create: Create | None = None


@dataclass(frozen=True)
class SparkSql:
    text: str


Statement = Create | Refresh | Drop | Show | Describe | Explain | SparkSql


@dataclass
class _Cursor:
    text: str
    tokens: list[Token]
    i: int = 0
    seen: dict[str, Token] = field(default_factory=dict)

    def peek(self, ahead: int = 0) -> Token | None:
        return self.tokens[self.i + ahead] if self.i + ahead < len(self.tokens) else None

    def at(self, *words: str) -> bool:
        return all((t := self.peek(k)) is not None and t.is_(w) for k, w in enumerate(words))

    def fail(self, expected: str, hint: str) -> errors.MvError:
        token = self.peek()
        start = token.start if token else len(self.text)
        return errors.statement_syntax(self.text, start, token.end if token else start, expected, hint)

    def take(self, *words: str, hint: str = "See docs/statements.md for the statement's form.") -> Token:
        if not self.at(*words):
            raise self.fail(" ".join(words), hint)
        first = self.peek()
        self.i += len(words)
        return first

    def take_if(self, *words: str) -> bool:
        if self.at(*words):
            self.i += len(words)
            return True
        return False

    def name(self) -> TableName:
        """A table's name, parsed into its parts (mv/names.py)."""
        start = self._identifier().start
        while (t := self.peek()) is not None and t.text == "." and self.peek(1) is not None:
            self.i += 1
            self._identifier()
        return TableName.parse(self.text[start:self.tokens[self.i - 1].end])

    def column(self) -> str:
        """A column's name, unquoted: `price` and `` `price` `` are the same column."""
        token = self._identifier()
        return token.text[1:-1] if token.text.startswith("`") else token.text

    def _identifier(self) -> Token:
        token = self.peek()
        if token is None or token.kind != "word":
            raise self.fail("a name", "Name the view, e.g. CREATE MATERIALIZED VIEW daily_totals ...")
        self.i += 1
        return token

    def string(self, what: str, example: str) -> str:
        """A quoted string; `example`: one, for the hint."""
        token = self.peek()
        if token is None or token.kind != "string":
            raise self.fail(what, f"Write it in single quotes, e.g. {example}.")
        self.i += 1
        return token.text

    def interval(self) -> str:
        """`INTERVAL '5' MINUTES`, `INTERVAL 5 MINUTES` (as Spark SQL takes it), `INTERVAL '5 minutes'`
        or `INTERVAL '1:30' HOUR TO MINUTE`, as written."""
        start = self.take("INTERVAL", hint="Write a duration as INTERVAL '5' MINUTES.").start
        if (t := self.peek()) is not None and t.kind == "number":
            self.i += 1
            if (u := self.peek()) is None or not u.is_(*INTERVAL_UNITS):
                raise self.fail("the interval's unit", "Write a duration as INTERVAL '5' MINUTES.")
        else:
            self.string("the interval's value", "INTERVAL '5' MINUTES")
        if (t := self.peek()) is not None and t.is_(*INTERVAL_UNITS):
            self.i += 1
            if self.take_if("TO"):
                self.i += 1
        return self.text[start:self.tokens[self.i - 1].end]

    def parenthesized(self, what: str) -> str:
        if (t := self.peek()) is None or t.text != "(":
            raise self.fail(f"( after {what}", f"Write {what} (col, ...).")
        depth, start = 0, t.start
        while (t := self.peek()) is not None:
            self.i += 1
            depth += {"(": 1, ")": -1}.get(t.text, 0)
            if depth == 0:
                return self.text[start:t.end]
        raise self.fail(")", f"Close the parenthesis after {what}.")

    def once(self, clause: str) -> None:
        token = self.peek()
        if clause in self.seen:
            raise errors.duplicate_clause(self.text, token.start, token.end, clause)
        self.seen[clause] = token

    def rest(self) -> str:
        """The query after AS, up to a closing ';' (nothing may follow it: see `end`)."""
        token = self.peek()
        if token is None:
            raise self.fail("a query", "Write the view's query after AS.")
        start = token.start
        while (t := self.peek()) is not None and t.text != ";":
            self.i += 1
        self.end()
        return self.text[start:t.start if t is not None else len(self.text)].strip()

    def end(self) -> None:
        """The statement ends here: nothing, or one ';' and nothing after it (comments and spaces
        aside). A second statement in the same text is refused, never run or dropped silently."""
        if (t := self.peek()) is not None and t.text != ";":
            raise self.fail("the end of the statement", "Remove what follows, or check the statement's form.")
        if (t := self.peek(1)) is not None:
            self.i += 1
            raise self.fail("the end of the text after ';'", "Run one statement at a time (spark.sql runs one); "
                            "`mv sql` and `mv sql -f FILE` run several, separated by ';'.")


def tokenize(text: str) -> list[Token]:
    return [Token(m.lastgroup, m.group(), m.start(), m.end())
            for m in _TOKEN.finditer(text) if m.lastgroup != "space"]


def parse(text: str) -> Statement:
    """The statement `text` is: one of the materialized-view statements, or plain Spark SQL."""
    c = _Cursor(text, tokenize(text))
    if c.at("CREATE") and _is_create_view(c):
        return _create(c)
    if c.take_if("REFRESH", "MATERIALIZED", "VIEW"):
        return _end(c, Refresh(c.name(), full=c.take_if("FULL")))
    if c.take_if("DROP", "MATERIALIZED", "VIEW"):
        if_exists = c.take_if("IF", "EXISTS")
        return _end(c, Drop(c.name(), if_exists))
    if c.take_if("SHOW", "MATERIALIZED", "VIEWS"):
        return _end(c, Show())
    if c.at("DESCRIBE", "MATERIALIZED", "VIEW") or c.at("DESC", "MATERIALIZED", "VIEW"):
        c.i += 3
        extended = c.take_if("EXTENDED")
        return _end(c, Describe(c.name(), extended))
    if c.take_if("EXPLAIN", "MATERIALIZED", "VIEW"):
        return _end(c, Explain(name=c.name()))
    if c.at("EXPLAIN", "CREATE"):
        c.i += 1
        if _is_create_view(c):
            return Explain(create=_create(c))
    return SparkSql(text)


def _end(c: _Cursor, statement: Statement) -> Statement:
    c.end()
    return statement


def _is_create_view(c: _Cursor) -> bool:
    offset = 3 if c.at("CREATE", "OR", "REPLACE") else 1
    return all((t := c.peek(offset + k)) is not None and t.is_(w) for k, w in enumerate(("MATERIALIZED", "VIEW")))


def _create(c: _Cursor) -> Create:
    c.take("CREATE")
    or_replace = c.take_if("OR", "REPLACE")
    c.take("MATERIALIZED", "VIEW")
    if_not_exists = c.take_if("IF", "NOT", "EXISTS")
    if or_replace and if_not_exists:
        raise errors.unsupported_combination("OR REPLACE and IF NOT EXISTS were both given",
                                             "Use one of them.")
    definition = Definition(name=c.name(), query="")
    while not c.at("AS"):
        definition = _clause(c, definition)
    c.take("AS")
    definition = replace(definition, query=c.rest())
    return Create(definition, or_replace, if_not_exists)


def _clause(c: _Cursor, d: Definition) -> Definition:
    if c.at("WATERMARK"):
        c.once("WATERMARK")
        c.take("WATERMARK", "FOR")
        column = c.column()
        c.take("AS")
        again = c.column()
        if again.lower() != column.lower() or (t := c.peek()) is None or t.text != "-":
            raise c.fail(f"{column} - INTERVAL ...", f"Write WATERMARK FOR {column} AS {column} - INTERVAL '5' MINUTES.")
        c.i += 1
        d = replace(d, watermark_column=column, watermark_delay=c.interval())
        return replace(d, watermark_idle=c.interval()) if c.take_if("IDLE", "AFTER") else d
    if c.at("EMIT"):
        c.once("EMIT")
        c.take("EMIT", "ON")
        if c.take_if("WINDOW", "CLOSE"):
            return replace(d, emit="WINDOW CLOSE")
        if c.take_if("UPDATE"):
            return replace(d, emit="UPDATE")
        raise c.fail("EMIT ON WINDOW CLOSE or EMIT ON UPDATE", "Choose one of the two emit modes.")
    if c.at("GRACE"):
        c.once("GRACE")
        c.take("GRACE")
        return replace(d, grace=c.interval())
    if c.at("REFRESH"):
        c.once("REFRESH POLICY")
        c.take("REFRESH", "POLICY")
        for policy in (("INCREMENTAL", "STRICT"), ("INCREMENTAL",), ("AUTO",), ("FULL",)):
            if c.take_if(*policy):
                return replace(d, policy=" ".join(policy))
        raise c.fail("AUTO, INCREMENTAL, INCREMENTAL STRICT or FULL", "Choose a refresh policy.")
    if c.at("SCHEDULE") or c.at("TRIGGER"):
        c.once("SCHEDULE")
        return replace(d, schedule=_schedule(c))
    if c.at("PARTITIONED", "BY") or c.at("CLUSTER", "BY"):
        c.once("PARTITIONED BY / CLUSTER BY")
        if c.take_if("PARTITIONED", "BY"):
            return replace(d, partitioned_by=c.parenthesized("PARTITIONED BY"))
        c.take("CLUSTER", "BY")
        return replace(d, cluster_by=c.parenthesized("CLUSTER BY"))
    if c.at("COMMENT"):
        c.once("COMMENT")
        c.take("COMMENT")
        return replace(d, comment=c.string("the comment", "COMMENT 'Bids per minute'"))
    if c.at("TBLPROPERTIES"):
        c.once("TBLPROPERTIES")
        c.take("TBLPROPERTIES")
        return replace(d, tblproperties=c.parenthesized("TBLPROPERTIES"))
    raise c.fail("a clause (WATERMARK, EMIT, GRACE, REFRESH POLICY, SCHEDULE, TRIGGER, PARTITIONED BY, "
                 "CLUSTER BY, COMMENT, TBLPROPERTIES) or AS", "Check the clause's spelling; the query follows AS.")


def _schedule(c: _Cursor) -> str:
    start = c.peek().start
    if c.take_if("TRIGGER", "ON", "UPDATE"):
        if c.take_if("AT", "MOST", "EVERY"):
            c.interval()
    elif c.take_if("SCHEDULE", "EVERY"):
        if (t := c.peek()) is None or t.kind != "number" or not t.text.isdigit() or int(t.text) <= 0:
            raise c.fail("a positive whole number", "Write SCHEDULE EVERY 15 MINUTES.")
        c.i += 1
        if not ((t := c.peek()) and t.is_("MINUTE", "MINUTES", "HOUR", "HOURS", "DAY", "DAYS")):
            raise c.fail("MINUTES, HOURS or DAYS", "Write SCHEDULE EVERY 15 MINUTES.")
        c.i += 1
    elif c.take_if("SCHEDULE", "CRON"):
        c.string("a cron expression", "SCHEDULE CRON '*/5 * * * *'")
        if c.take_if("AT", "TIME", "ZONE"):
            c.string("a time zone", "AT TIME ZONE 'Europe/Paris'")
    else:
        raise c.fail("SCHEDULE EVERY, SCHEDULE CRON or TRIGGER ON UPDATE", "See docs/statements.md.")
    return c.text[start:c.tokens[c.i - 1].end]
