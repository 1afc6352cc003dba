package io.mvengine

import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression, ExpressionInfo, SortOrder}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, UnaryNode}

/**
 * Esper's data windows as table functions over a table ordered by its time column.
 *
 * Each is named after Esper's `namespace:name` with the colon written as an underscore
 * (`win:length` is WIN_LENGTH, `std:unique` STD_UNIQUE, `ext:sort` EXT_SORT). Esper's
 * `groupwin(key)` is `PARTITION BY key` on the table argument, for every kind:
 * {{{
 *   -- Esper: select symbol, sum(price) from StockTick#groupwin(symbol)#length(5) group by symbol
 *   SELECT symbol, window_seq, SUM(price)
 *   FROM WIN_LENGTH(TABLE(ticks) PARTITION BY symbol, DESCRIPTOR(ts), 5)
 *   GROUP BY symbol, window_seq
 * }}}
 * Three families (see docs/windows.md, "Esper data windows"):
 *  - sliding (`Sliding`): one window per event, ending at it; each row once per window holding it;
 *  - batch (`Batch`): each row in the one batch that holds it;
 *  - retention (`Retention`): a filter; the rows the window holds once every row has arrived.
 */
sealed abstract class EsperWindowKind(val name: String, val esperName: String, val arguments: Seq[String],
                                      val required: Int, val usage: String, val description: String,
                                      val windowColumns: Seq[String]) {

  /** How SHOW FUNCTIONS and DESCRIBE FUNCTION present it. */
  def registration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) = (
    FunctionIdentifier(name.toLowerCase),
    new ExpressionInfo(classOf[EsperWindowCall].getName, null, name.toLowerCase,
      s"$usage - $description (Esper: $esperName)", ""),
    (_: Seq[Expression]) => throw WindowErrors.notRewritten(name))
}

object EsperWindowKind {
  private val Data = Seq("DATA", "TIMECOL")
  private val Windowed = Seq("window_start", "window_end", "window_time")
  private val Counted = Windowed :+ "window_seq"
  private def call(name: String, args: String*): String =
    s"$name(TABLE(data) [PARTITION BY key], DESCRIPTOR(timecol)${args.map(", " + _).mkString})"

  // Sliding: one window per event, ending at it.
  case object Length extends EsperWindowKind("WIN_LENGTH", "length", Data :+ "SIZE", 3, call("WIN_LENGTH", "size"),
    "Each row's window: the last size rows up to it.", Counted)
  case object Time extends EsperWindowKind("WIN_TIME", "time", Data :+ "SIZE", 3, call("WIN_TIME", "size"),
    "Each event time's window: the rows of the last size up to it.", Windowed)
  case object ExtTimed extends EsperWindowKind("WIN_EXT_TIMED", "ext_timed", Data :+ "SIZE", 3,
    call("WIN_EXT_TIMED", "size"), "Same as WIN_TIME: tables are always externally timed.", Windowed)
  case object TimeAccum extends EsperWindowKind("WIN_TIME_ACCUM", "time_accum", Data :+ "SIZE", 3,
    call("WIN_TIME_ACCUM", "size"), "Accumulates rows until none arrives for size.", Windowed)

  // Batch: each row in one batch.
  case object LengthBatch extends EsperWindowKind("WIN_LENGTH_BATCH", "length_batch", Data :+ "SIZE", 3,
    call("WIN_LENGTH_BATCH", "size"), "Batches of size rows; an incomplete last batch is not released.", Counted)
  case object TimeBatch extends EsperWindowKind("WIN_TIME_BATCH", "time_batch",
    Data ++ Seq("SIZE", "REFERENCE", "FLOW_CONTROL"), 3,
    call("WIN_TIME_BATCH", "size [, reference [, 'FORCE_UPDATE, START_EAGER']]"),
    "Batches of size, from the reference point or the first row.", Windowed)
  case object ExtTimedBatch extends EsperWindowKind("WIN_EXT_TIMED_BATCH", "ext_timed_batch",
    Data ++ Seq("SIZE", "REFERENCE"), 3, call("WIN_EXT_TIMED_BATCH", "size [, reference]"),
    "Same as WIN_TIME_BATCH without flow control.", Windowed)
  case object TimeLengthBatch extends EsperWindowKind("WIN_TIME_LENGTH_BATCH", "time_length_batch",
    Data ++ Seq("SIZE", "COUNT"), 4, call("WIN_TIME_LENGTH_BATCH", "size, count"),
    "Batches released after size or at count rows, whichever comes first.", Counted)
  case object ExprBatch extends EsperWindowKind("WIN_EXPR_BATCH", "expr_batch",
    Data ++ Seq("EXPRESSION", "INCLUDE_TRIGGERING"), 3,
    call("WIN_EXPR_BATCH", "expression [, include_triggering]"),
    "Batches that close at each row where expression is true.", Counted)

  // Retention: a filter of the table.
  case object Keepall extends EsperWindowKind("WIN_KEEPALL", "keepall", Data, 2, call("WIN_KEEPALL"),
    "Every row (with a time).", Nil)
  case object FirstLength extends EsperWindowKind("WIN_FIRSTLENGTH", "firstlength", Data :+ "SIZE", 3,
    call("WIN_FIRSTLENGTH", "size"), "The first size rows.", Nil)
  case object FirstTime extends EsperWindowKind("WIN_FIRSTTIME", "firsttime", Data :+ "SIZE", 3,
    call("WIN_FIRSTTIME", "size"), "The rows before first time + size.", Nil)
  case object Unique extends EsperWindowKind("STD_UNIQUE", "unique", Data :+ "UNIQUE", 3,
    call("STD_UNIQUE", "DESCRIPTOR(key, ...)"), "The latest row per key.", Nil)
  case object FirstUnique extends EsperWindowKind("STD_FIRSTUNIQUE", "firstunique", Data :+ "UNIQUE", 3,
    call("STD_FIRSTUNIQUE", "DESCRIPTOR(key, ...)"), "The first row per key.", Nil)
  case object LastEvent extends EsperWindowKind("STD_LASTEVENT", "lastevent", Data, 2, call("STD_LASTEVENT"),
    "The latest row.", Nil)
  case object FirstEvent extends EsperWindowKind("STD_FIRSTEVENT", "firstevent", Data, 2, call("STD_FIRSTEVENT"),
    "The first row.", Nil)
  case object Sort extends EsperWindowKind("EXT_SORT", "sort", Data :+ "SIZE", 3,
    "EXT_SORT(TABLE(data) {PARTITION BY key | WITH SINGLE PARTITION} ORDER BY (criteria), DESCRIPTOR(timecol), size)",
    "The top size rows by the ORDER BY criteria.", Nil)
  case object Rank extends EsperWindowKind("EXT_RANK", "rank", Data ++ Seq("UNIQUE", "SIZE"), 4,
    "EXT_RANK(TABLE(data) {PARTITION BY key | WITH SINGLE PARTITION} ORDER BY (criteria), DESCRIPTOR(timecol), " +
      "DESCRIPTOR(unique_key, ...), size)",
    "The top size rows by the ORDER BY criteria among the latest row per unique key.", Nil)

  val all: Seq[EsperWindowKind] = Seq(Length, Time, ExtTimed, TimeAccum, LengthBatch, TimeBatch, ExtTimedBatch,
    TimeLengthBatch, ExprBatch, Keepall, FirstLength, FirstTime, Unique, FirstUnique, LastEvent, FirstEvent, Sort, Rank)

  /** Kinds whose TABLE ORDER BY gives the sort criteria rather than tie-breakers. */
  val sorted: Set[EsperWindowKind] = Set(Sort, Rank)

  def find(nameParts: Seq[String]): Option[EsperWindowKind] = nameParts match {
    case Seq(single) => all.find(_.name.equalsIgnoreCase(single))
    case _ => None
  }
}

/**
 * An Esper data window call whose arguments are bound but not yet resolved: the analyzer resolves
 * its expressions against `child`, then [[EsperDataWindows.Rewrite]] checks them and replaces the
 * call with Spark's own operators.
 *
 * `orderBy` is the table argument's ORDER BY: sort criteria for EXT_SORT and EXT_RANK, tie-breakers
 * after the time column for the others. `uniqueKeys` is the UNIQUE argument's columns.
 */
case class EsperWindowCall(
    kind: EsperWindowKind,
    timeColumn: Expression,
    partitionBy: Seq[Expression],
    orderBy: Seq[SortOrder],
    uniqueKeys: Seq[Expression],
    paramNames: Seq[String],
    params: Seq[Expression],
    child: LogicalPlan) extends UnaryNode {

  override def output: Seq[Attribute] = Nil
  override lazy val resolved: Boolean = false

  def param(name: String): Option[Expression] =
    paramNames.zip(params).collectFirst { case (n, e) if n == name => e }

  override protected def withNewChildInternal(newChild: LogicalPlan): EsperWindowCall = copy(child = newChild)
}
