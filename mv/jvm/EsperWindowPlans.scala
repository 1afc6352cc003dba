package io.mvengine

import org.apache.spark.sql.catalyst.expressions._
import org.apache.spark.sql.catalyst.expressions.aggregate.{CollectList, Count, Max, Min, Sum}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Generate, LogicalPlan, Project, Window}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types._

/**
 * The Spark plan of one validated Esper data window call (see [[EsperWindowKind]]).
 *
 * The table is ordered by the time column, then the table argument's ORDER BY (except for
 * EXT_SORT and EXT_RANK, where it is the sort criteria), then every other orderable column
 * ascending, so ties always break the same way. Rows with a NULL time are dropped (rule 8).
 * Windows hold `[window_start, window_end)`; window_time = window_end - 1 µs. Example, with
 * size 3 and rows at 1, 2, 3, 4 seconds, WIN_LENGTH gives window_seq 4 the rows at 2, 3, 4 s with
 * window_start 2 s, window_end 4 s + 1 µs, window_time 4 s.
 */
class EsperWindowPlans(call: EsperWindowCall) {
  import EsperWindowKind._
  import EsperWindowPlans._

  private val kind = call.kind
  private val time = call.timeColumn
  private val columns: Seq[Attribute] = call.child.output
  private val args = new EsperWindowArguments(call)
  private val base: LogicalPlan = Filter(IsNotNull(time), call.child)
  private val partition = call.partitionBy
  private val micros: Expression = PreciseTimestampConversion(time, time.dataType, LongType)

  private def toTime(m: Expression): Expression = PreciseTimestampConversion(m, LongType, time.dataType)
  private def plus(e: Expression, by: Long): Expression = if (by == 0) e else Add(e, Literal(by))

  private val tieBreakers: Seq[SortOrder] = columns
    .filter(c => !c.semanticEquals(time) && RowOrdering.isOrderable(c.dataType)).map(SortOrder(_, Ascending))
  private val eventOrder: Seq[SortOrder] = SortOrder(time, Ascending) +:
    (if (EsperWindowKind.sorted(kind)) Nil else call.orderBy) ++: tieBreakers

  def plan: LogicalPlan = {
    args.checkTimeColumn()
    checkColumnConflicts()
    kind match {
      case Keepall => Project(columns, base)
      case FirstLength => keepRowNumbers(partition, eventOrder, LessThanOrEqual(_, Literal(args.count("SIZE"))))
      case FirstEvent => keepRowNumbers(partition, eventOrder, EqualTo(_, Literal(1)))
      case LastEvent => keepRowNumbers(partition, eventOrder.map(reverse), EqualTo(_, Literal(1)))
      case Unique => keepRowNumbers(partition ++ call.uniqueKeys, eventOrder.map(reverse), EqualTo(_, Literal(1)))
      case FirstUnique => keepRowNumbers(partition ++ call.uniqueKeys, eventOrder, EqualTo(_, Literal(1)))
      case FirstTime => firstTime(args.interval("SIZE"))
      case Sort => keepRowNumbers(partition, sortOrder, LessThanOrEqual(_, Literal(args.count("SIZE"))))
      case Rank => rank(args.count("SIZE"))
      case Length => length(args.count("SIZE", limit = Some(MaxWindowsPerRow)))
      case Time | ExtTimed => slidingTime(args.interval("SIZE"))
      case TimeAccum => timeAccum(args.interval("SIZE"))
      case LengthBatch => countedBatches(lengthBatchNumber(args.count("SIZE")))
      case ExprBatch => countedBatches(exprBatchNumber(args.condition("EXPRESSION"), args.flag("INCLUDE_TRIGGERING")))
      case TimeLengthBatch => timeLengthBatches(args.interval("SIZE"), args.count("COUNT"))
      case TimeBatch | ExtTimedBatch => timeBatches(args.interval("SIZE"), args.reference(), args.flowControl())
    }
  }

  private def checkColumnConflicts(): Unit = {
    val resolver = SQLConf.get.resolver
    for (name <- kind.windowColumns; column <- columns if resolver(column.name, name)) {
      throw WindowErrors.esperColumnConflict(kind, column.name)
    }
  }

  private def sortOrder: Seq[SortOrder] = {
    if (call.orderBy.isEmpty) throw WindowErrors.sortCriteriaMissing(kind)
    call.orderBy ++ eventOrder
  }

  /** Rows whose row_number() over (keys, order) passes `keep`: first/last rows, top n. */
  private def keepRowNumbers(keys: Seq[Expression], order: Seq[SortOrder], keep: Expression => Expression,
                             child: LogicalPlan = base): LogicalPlan = {
    val (numbered, Seq(rn)) = window(child, keys, order, ("_rn", RowNumber(), RunningRows))
    Project(columns, Filter(keep(rn), numbered))
  }

  /** EXT_RANK: the latest row per unique key, then the top n of those by the sort criteria. */
  private def rank(n: Long): LogicalPlan = {
    val latest = keepRowNumbers(partition ++ call.uniqueKeys, eventOrder.map(reverse), EqualTo(_, Literal(1)))
    keepRowNumbers(partition, sortOrder, LessThanOrEqual(_, Literal(n)), latest)
  }

  /** WIN_FIRSTTIME: rows before the (partition's) first time + size. */
  private def firstTime(size: Long): LogicalPlan = {
    val (withFirst, Seq(first)) = window(base, partition, Nil, ("_first", Min(micros).toAggregateExpression(), All))
    Project(columns, Filter(LessThan(micros, plus(first, size)), withFirst))
  }

  /** WIN_LENGTH: each row's window holds the last n rows up to it; window_seq numbers the windows. */
  private def length(n: Long): LogicalPlan = {
    val (withRow, row) = withRowStruct(base)
    val frame = SpecifiedWindowFrame(RowFrame, if (n == 1) CurrentRow else Literal((1 - n).toInt), CurrentRow)
    val (windows, Seq(members, first, seq)) = window(withRow, partition, eventOrder,
      ("_members", CollectList(row).toAggregateExpression(), frame),
      ("_first", Min(micros).toAggregateExpression(), frame), ("_seq", RowNumber(), RunningRows))
    explodeMembers(windows, members, first, plus(micros, 1), Some(Cast(seq, LongType)))
  }

  /**
   * WIN_TIME: the window of an event at t holds the rows in (t - size, t], as Esper's time window
   * does when that event arrives: window_start = t - size + 1 µs, window_end = t + 1 µs,
   * window_time = t. Rows with equal times share one window.
   */
  private def slidingTime(size: Long): LogicalPlan = {
    val (withRow, row) = withRowStruct(base)
    val t = Alias(micros, "_t")()
    val timed = Project(withRow.output :+ t, withRow)
    val frame = SpecifiedWindowFrame(RangeFrame, Literal(1 - size), CurrentRow)
    val (windows, Seq(members)) = window(timed, partition, Seq(SortOrder(t.toAttribute, Ascending)),
      ("_members", CollectList(row).toAggregateExpression(), frame))
    val (peers, Seq(peer)) = window(windows, partition :+ t.toAttribute, eventOrder,
      ("_peer", RowNumber(), RunningRows))
    explodeMembers(Filter(EqualTo(peer, Literal(1)), peers), members, plus(t.toAttribute, 1 - size),
      plus(t.toAttribute, 1), None)
  }

  /**
   * WIN_TIME_ACCUM: a row joins the current accumulation while it comes less than size after the
   * previous row; the window runs from its first row to its last row + size, when Esper releases it.
   */
  private def timeAccum(size: Long): LogicalPlan = {
    val lag = Lag(micros, Literal(1), Literal(null, LongType), ignoreNulls = false)
    val (withPrevious, Seq(previous)) = window(base, partition, eventOrder, ("_previous", lag, lag.frame))
    val opens = Alias(If(Or(IsNull(previous), GreaterThanOrEqual(Subtract(micros, previous), Literal(size))),
      Literal(1L), Literal(0L)), "_opens")()
    val marked = Project(withPrevious.output :+ opens, withPrevious)
    val (numbered, Seq(number)) = window(marked, partition, eventOrder,
      ("_accumulation", Sum(opens.toAttribute).toAggregateExpression(), RunningRows))
    val (bounded, Seq(first, last)) = window(numbered, partition :+ number, Nil,
      ("_first", Min(micros).toAggregateExpression(), All), ("_last", Max(micros).toAggregateExpression(), All))
    Project(columns ++ windowColumns(first, plus(last, size)), bounded)
  }

  /** WIN_LENGTH_BATCH: batch k (from 0) holds rows n*k+1 .. n*k+n; it is complete with n rows. */
  private def lengthBatchNumber(n: Long): (LogicalPlan, Expression, Expression) = {
    val (numbered, Seq(rn)) = window(base, partition, eventOrder, ("_rn", RowNumber(), RunningRows))
    val batch = IntegralDivide(Subtract(Cast(rn, LongType), Literal(1L)), Literal(n))
    (numbered, batch, Literal(n))
  }

  /**
   * WIN_EXPR_BATCH: a row where the condition is true closes its batch (include_triggering) or
   * opens the next; a batch is complete once a later trigger closes it.
   */
  private def exprBatchNumber(condition: Expression, includeTriggering: Boolean): (LogicalPlan, Expression, Expression) = {
    val trigger = If(Coalesce(Seq(condition, Literal(false))), Literal(1L), Literal(0L))
    val (counted, Seq(running, total)) = window(base, partition, eventOrder,
      ("_triggers", Sum(trigger).toAggregateExpression(), RunningRows),
      ("_total_triggers", Sum(trigger).toAggregateExpression(), All))
    val batch = if (includeTriggering) Subtract(running, trigger) else running
    (Filter(LessThan(batch, total), counted), batch, null)
  }

  /**
   * Count-based batches: each row with window_start = its batch's first time, window_end = its last
   * time + 1 µs and window_seq = batch number + 1; `size` (when not null) keeps only full batches.
   */
  private def countedBatches(numbered: (LogicalPlan, Expression, Expression)): LogicalPlan = {
    val (child, batchExpression, size) = numbered
    val batch = Alias(batchExpression, "_batch")()
    val withBatch = Project(child.output :+ batch, child)
    val (bounded, Seq(count, first, last)) = window(withBatch, partition :+ batch.toAttribute, Nil,
      ("_count", Count(Literal(1)).toAggregateExpression(), All),
      ("_first", Min(micros).toAggregateExpression(), All), ("_last", Max(micros).toAggregateExpression(), All))
    val complete = if (size == null) bounded else Filter(EqualTo(count, size), bounded)
    Project(columns ++ windowColumns(first, plus(last, 1)) :+
      Alias(Add(batch.toAttribute, Literal(1L)), "window_seq")(), complete)
  }

  /**
   * WIN_TIME_BATCH: batches [ref + k*size, ref + (k+1)*size), ref the reference point or else the
   * partition's first time (START_EAGER: the table's first time). With flow control, empty batches
   * are rows too (see emptyBatches).
   */
  private def timeBatches(size: Long, reference: Option[Long], flow: FlowControl): LogicalPlan = {
    val t = Alias(micros, "_t")()
    val timed = Project(base.output :+ t, base)
    val (referenced, ref) = reference match {
      case Some(r) => (timed, Literal(r))
      case None =>
        val keys = if (flow.startEager) Nil else partition
        val (p, Seq(first)) = window(timed, keys, Nil, ("_reference", Min(t.toAttribute).toAggregateExpression(), All))
        (p, first)
    }
    val start = Alias(Subtract(t.toAttribute, Pmod(Subtract(t.toAttribute, ref), Literal(size))), "_start")()
    val started = Project(referenced.output :+ start, referenced)
    if (!flow.forceUpdate) Project(columns ++ windowColumns(start.toAttribute, plus(start.toAttribute, size)), started)
    else emptyBatches(started, start.toAttribute, t.toAttribute, size, flow.startEager)
  }

  /** WIN_TIME_LENGTH_BATCH: batches numbered by the [[EsperTimeLengthBatch]] operator's replay. */
  private def timeLengthBatches(size: Long, count: Long): LogicalPlan = {
    val batchColumns = Seq("_batch", "_batch_start", "_batch_end").map(AttributeReference(_, LongType, nullable = false)())
    val Seq(batch, start, end) = batchColumns
    val replayed = EsperTimeLengthBatch(partition, eventOrder, micros, size, count, batchColumns, base)
    Project(columns ++ windowColumns(start, end) :+ Alias(batch, "window_seq")(), replayed)
  }

  /**
   * FORCE_UPDATE: every batch from the partition's first (START_EAGER: the table's first) up to the
   * table's last is a row; an empty one has NULL in every column but the PARTITION BY columns, so
   * `count(timecol)` is 0 for it. The first row of each batch also emits the empty batches since
   * the previous one, the partition's last row those up to the table's last batch.
   */
  private def emptyBatches(started: LogicalPlan, start: Attribute, t: Attribute, size: Long,
                           startEager: Boolean): LogicalPlan = {
    val lag = Lag(start, Literal(1), Literal(null, LongType), ignoreNulls = false)
    val lead = Lead(t, Literal(1), Literal(null, LongType), ignoreNulls = false)
    val (neighbours, Seq(previous, next)) = window(started, partition, eventOrder,
      ("_previous_start", lag, lag.frame), ("_next_t", lead, lead.frame))
    val (spanned, Seq(first, last)) = window(neighbours, Nil, Nil,
      ("_first_start", Min(start).toAggregateExpression(), All), ("_last_start", Max(start).toAggregateExpression(), All))
    val from = CaseWhen(Seq(
      IsNull(previous) -> (if (startEager) first else start),
      EqualTo(previous, start) -> start), Some(plus(previous, size)))
    val to = If(IsNull(next), last, start)
    val batch = AttributeReference("_batch_start", LongType, nullable = false)()
    val exploded = Generate(Explode(new Sequence(from, to, Some(Literal(size)), None)), Nil, outer = false, None,
      Seq(batch), spanned)
    val isRow = EqualTo(batch, start)
    val kept = columns.map {
      case c if partition.exists(_.semanticEquals(c)) => c
      case c => Alias(If(isRow, c, Literal(null, c.dataType)), c.name)()
    }
    Project(kept ++ windowColumns(batch, plus(batch, size)), exploded)
  }

  private def windowColumns(start: Expression, end: Expression): Seq[NamedExpression] = Seq(
    Alias(toTime(start), "window_start")(), Alias(toTime(end), "window_end")(),
    Alias(toTime(Subtract(end, Literal(1L))), "window_time")())

  /** The plan plus a struct of the row's columns, to collect a window's rows into an array. */
  private def withRowStruct(child: LogicalPlan): (LogicalPlan, Attribute) = {
    val row = Alias(CreateStruct(columns), "_row")()
    (Project(child.output :+ row, child), row.toAttribute)
  }

  /** One output row per member of each window: the member's columns plus the window's. */
  private def explodeMembers(windows: LogicalPlan, members: Attribute, start: Expression, end: Expression,
                             seq: Option[Expression]): LogicalPlan = {
    val rowType = members.dataType.asInstanceOf[ArrayType].elementType
    val member = AttributeReference("_member", rowType, nullable = false)()
    val exploded = Generate(Explode(members), Nil, outer = false, None, Seq(member), windows)
    val memberColumns = columns.zipWithIndex.map { case (c, i) => Alias(GetStructField(member, i), c.name)() }
    Project(memberColumns ++ windowColumns(start, end) ++ seq.map(Alias(_, "window_seq")()), exploded)
  }
}

object EsperWindowPlans {
  /** As for HOP: how many windows one row may be repeated into (WIN_LENGTH's size). */
  val MaxWindowsPerRow = 10000

  val RunningRows: WindowFrame = SpecifiedWindowFrame(RowFrame, UnboundedPreceding, CurrentRow)
  val All: WindowFrame = SpecifiedWindowFrame(RowFrame, UnboundedPreceding, UnboundedFollowing)

  case class FlowControl(forceUpdate: Boolean, startEager: Boolean)

  def reverse(o: SortOrder): SortOrder = SortOrder(o.child, if (o.direction == Ascending) Descending else Ascending)

  /** Window functions over (keys, order), each with its frame; returns the plan and their columns. */
  def window(child: LogicalPlan, keys: Seq[Expression], order: Seq[SortOrder],
             fns: (String, Expression, WindowFrame)*): (LogicalPlan, Seq[Attribute]) = {
    val aliases = fns.map { case (name, fn, frame) =>
      Alias(WindowExpression(fn, WindowSpecDefinition(keys, order, frame)), name)()
    }
    (Window(aliases, keys, order, child), aliases.map(_.toAttribute))
  }
}
