package io.mvengine

import scala.util.Try

import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.analysis.{FunctionRegistry, UnresolvedAlias, UnresolvedAttribute, UnresolvedFunction, UnresolvedHaving, UnresolvedStar}
import org.apache.spark.sql.catalyst.expressions.{Add, Alias, And, Ascending, CurrentRow, EqualTo, Expression, GreaterThan, GreaterThanOrEqual, Greatest, IsNotNull, IntegralDivide, Least, LessThanOrEqual, Literal, MonotonicallyIncreasingID, Multiply, NamedArgumentExpression, NamedExpression, Pmod, RangeFrame, RowFrame, SortOrder, SpecifiedWindowFrame, Subtract, UnspecifiedFrame, WindowExpression, WindowFrame, WindowSpecDefinition}
import org.apache.spark.sql.catalyst.util.toPrettySQL
import org.apache.spark.sql.catalyst.plans.Inner
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, JoinHint, LogicalPlan, Project, Range}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.DayTimeIntervalType

/**
 * eKuiper's window functions in GROUP BY, rewritten as the statement is parsed into plans of
 * Spark's own operators (and the window table functions):
 * {{{
 *   SELECT count(*) FROM demo GROUP BY ID, COUNTWINDOW(5, 2)
 *   SELECT window_start(), window_end(), count(*) FROM demo GROUP BY TUMBLINGWINDOW(ss, 10)
 *   SELECT count(*) FROM demo GROUP BY SLIDINGWINDOW(ss, 1) FILTER(WHERE revenue > 100) OVER(WHEN revenue > 200)
 * }}}
 * As in eKuiper, the window is cut from the whole input (after `FILTER(WHERE ...)`), then its rows
 * are grouped by the other GROUP BY keys. The event time is the column named by
 * `TIMECOL => column` in the call, else by `spark.mv.ekuiper.timestamp` (default `ts`, as in
 * eKuiper's `TIMESTAMP="ts"`): TIMESTAMP, TIMESTAMP_NTZ or BIGINT epoch milliseconds.
 *
 *  - TUMBLINGWINDOW(unit, size), HOPPINGWINDOW(unit, size, hop): TUMBLE and HOP, aligned to natural time;
 *  - SESSIONWINDOW(unit, maxDuration, timeout): [[EkuiperSessionExec]];
 *  - SLIDINGWINDOW(unit, size[, delay]) [OVER(WHEN cond)]: one window (t - size, t + delay] per
 *    event t meeting cond, as a range join of the triggering events with all events;
 *  - COUNTWINDOW(n[, m]): rows numbered by time (ties by a hash of the row), windows of rows
 *    j - n + 1 .. j for every j that is a multiple of m, from n up to the row count.
 * `window_start()` and `window_end()` in the select list give each window's bounds.
 */
object EkuiperWindows {
  val TimestampConf = "spark.mv.ekuiper.timestamp"

  private val Units: Map[String, Long] = Map("DD" -> 86400000000L, "HH" -> 3600000000L,
    "MI" -> 60000000L, "SS" -> 1000000L, "MS" -> 1000L)
  /** Each function's required and optional positional arguments (the unit counts as one). */
  private val Arity: Map[String, (Int, Int)] = Map("TUMBLINGWINDOW" -> (2, 0), "HOPPINGWINDOW" -> (3, 0),
    "SLIDINGWINDOW" -> (2, 1), "SESSIONWINDOW" -> (3, 0), "COUNTWINDOW" -> (1, 1))

  private case class Call(name: String, args: Seq[Expression], time: Expression,
                          filter: Option[Expression], when: Option[Expression])

  def rewrite(plan: LogicalPlan): LogicalPlan = plan.transformDownWithSubqueries {
    // HAVING filters groups, so its aggregate stays one (no window-frame form).
    case h @ UnresolvedHaving(_, a: Aggregate) if isWindowed(a) => h.copy(child = rewriteAggregate(a, framable = false))
    case a: Aggregate if isWindowed(a) => rewriteAggregate(a, framable = true)
  }

  private def isWindowed(a: Aggregate): Boolean = a.groupingExpressions.exists(e => call(e).isDefined)

  private def functionName(e: Expression): Option[String] = e match {
    case f: UnresolvedFunction if f.nameParts.size == 1 && Arity.contains(f.nameParts.head.toUpperCase) =>
      Some(f.nameParts.head.toUpperCase)
    case _ => None
  }

  private def call(e: Expression): Option[Call] = e match {
    case f: UnresolvedFunction if functionName(f).isDefined => Some(bind(functionName(f).get, f, None))
    case WindowExpression(f: UnresolvedFunction, spec: WindowSpecDefinition) if functionName(f).isDefined =>
      val name = functionName(f).get
      if (spec.partitionSpec.size != 1 || spec.orderSpec.nonEmpty || spec.frameSpecification != UnspecifiedFrame) {
        throw WindowErrors.ekuiperBadOver(name)
      }
      Some(bind(name, f, spec.partitionSpec.headOption))
    case _ => None
  }

  private def bind(name: String, f: UnresolvedFunction, when: Option[Expression]): Call = {
    val (named, positional) = f.arguments.partition(_.isInstanceOf[NamedArgumentExpression])
    val time = named.map(_.asInstanceOf[NamedArgumentExpression]).map {
      case NamedArgumentExpression(key, value: UnresolvedAttribute) if key.equalsIgnoreCase("TIMECOL") => value
      case NamedArgumentExpression(key, value: UnresolvedFunction)
          if key.equalsIgnoreCase("TIMECOL") && value.arguments.size == 1 => value.arguments.head
      case other => throw WindowErrors.ekuiperArguments(name, s"unknown argument ${other.key}")
    }.headOption.getOrElse(UnresolvedAttribute.quotedString(SQLConf.get.getConfString(TimestampConf, "ts")))
    val (required, optional) = Arity(name)
    if (positional.size < required || positional.size > required + optional) {
      throw WindowErrors.ekuiperArguments(name, s"got ${positional.size} arguments")
    }
    if (when.isDefined && name != "SLIDINGWINDOW") throw WindowErrors.ekuiperBadOver(name)
    Call(name, positional, time, f.filter, when)
  }

  private def rewriteAggregate(a: Aggregate, framable: Boolean): LogicalPlan = {
    val calls = a.groupingExpressions.flatMap(call)
    if (calls.size > 1) throw WindowErrors.ekuiperMoreThanOne(calls.map(_.name))
    val c = calls.head
    val keys = a.groupingExpressions.filter(e => call(e).isEmpty)
    // FILTER(WHERE ...) runs before windowing; a NULL event time drops the row (docs/design.md rule 8).
    val input = Filter(IsNotNull(c.time), c.filter.map(Filter(_, a.child)).getOrElse(a.child))
    c.name match {
      case "COUNTWINDOW" => countWindow(a, c, keys, input, framable)
      case "SLIDINGWINDOW" => slidingWindow(a, c, keys, input, framable)
      case name =>
        val unit = timeUnit(c)
        val sizes = c.args.tail.map(e => unit * positive(c, e))
        val (kind, params) = name match {
          case "TUMBLINGWINDOW" => (WindowKind.Tumble, Seq("SIZE" -> sizes(0)))
          case "HOPPINGWINDOW" => (WindowKind.Hop, Seq("SLIDE" -> sizes(1), "SIZE" -> sizes(0)))
          case "SESSIONWINDOW" => (WindowKind.EkuiperSession, Seq("SIZE" -> sizes(0), "GAP" -> sizes(1)))
        }
        val windows = WindowTableFunctionCall(kind, c.time, Nil, params.map(_._1),
          params.map(p => Literal(p._2, DayTimeIntervalType())), input)
        val (start, end) = (UnresolvedAttribute("window_start"), UnresolvedAttribute("window_end"))
        Aggregate(keys ++ Seq(start, end), withBounds(a, start, end), windows)
    }
  }

  /** One window per triggering event t: the events in (t - size, t + delay]. */
  private def slidingWindow(a: Aggregate, c: Call, keys: Seq[Expression], input: LogicalPlan,
                            framable: Boolean): LogicalPlan = {
    val unit = timeUnit(c)
    val size = unit * positive(c, c.args(1))
    val delay = c.args.lift(2).map(e => unit * nonNegative(c, e)).getOrElse(0L)
    if (keys.isEmpty && framable) {
      val base = Project(Seq(UnresolvedStar(None), Alias(TimeMicros(c.time), "_mv_micros")()), input)
      val frame = SpecifiedWindowFrame(RangeFrame, Literal(1L - size), if (delay == 0) CurrentRow else Literal(delay))
      val order = Seq(SortOrder(UnresolvedAttribute("_mv_micros"), Ascending))
      val helpers = c.when.map(Alias(_, "_mv_trigger")()).toSeq
      val framed = frameRewrite(a, frame, order, TimePlus(c.time, -size), TimePlus(c.time, delay),
        c.when.map(_ => UnresolvedAttribute("_mv_trigger")).getOrElse(Literal(true)), helpers, base)
      if (framed.isDefined) return framed.get
    }
    val (trigger, triggerTime) = (UnresolvedAttribute("_mv_trigger"), UnresolvedAttribute("_mv_trigger_time"))
    val triggers = Project(Seq(Alias(c.time, triggerTime.name)(), Alias(MonotonicallyIncreasingID(), trigger.name)()),
      c.when.map(Filter(_, input)).getOrElse(input))
    val inWindow = And(GreaterThan(c.time, TimePlus(triggerTime, -size)),
      LessThanOrEqual(c.time, TimePlus(triggerTime, delay)))
    Aggregate(keys ++ Seq(trigger, triggerTime),
      withBounds(a, TimePlus(triggerTime, -size), TimePlus(triggerTime, delay)),
      Join(input, triggers, Inner, Some(inWindow), JoinHint.NONE))
  }

  /** Windows of the rows j - n + 1 .. j, for j = m, 2m, ... from n up to the row count. */
  private def countWindow(a: Aggregate, c: Call, keys: Seq[Expression], input: LogicalPlan,
                          framable: Boolean): LogicalPlan = {
    val n = positive(c, c.args(0))
    val m = c.args.lift(1).map(positive(c, _)).getOrElse(n)
    if (m > n) throw WindowErrors.ekuiperIntervalAboveSize(n, m)
    def fn(name: String, args: Expression*) = UnresolvedFunction(name, args, isDistinct = false)
    def attr(name: String) = UnresolvedAttribute(name)
    val tie = Project(Seq(UnresolvedStar(None), Alias(fn("hash", UnresolvedStar(None)), "_mv_tie")()), input)
    val order = Seq(SortOrder(c.time, Ascending), SortOrder(attr("_mv_tie"), Ascending))
    if (keys.isEmpty && framable) {
      val row = Alias(WindowExpression(fn("row_number"), WindowSpecDefinition(Nil, order, UnspecifiedFrame)), "_mv_row")()
      val frame = SpecifiedWindowFrame(RowFrame, Literal(1 - n.toInt), CurrentRow)
      val first = WindowExpression(fn("min", c.time), WindowSpecDefinition(Nil, order, frame))
      val keep = And(EqualTo(Pmod(attr("_mv_row"), Literal(m)), Literal(0L)), GreaterThanOrEqual(attr("_mv_row"), Literal(n)))
      val framed = frameRewrite(a, frame, order, first, c.time, keep, Seq(row), tie)
      if (framed.isDefined) return framed.get
    }
    val numbered = Project(Seq(UnresolvedStar(None),
      Alias(WindowExpression(fn("row_number"), WindowSpecDefinition(Nil, order, UnspecifiedFrame)), "_mv_row")(),
      Alias(WindowExpression(fn("count", Literal(1)), WindowSpecDefinition(Nil, Nil, UnspecifiedFrame)), "_mv_rows")()),
      tie)
    val copies = Project(Seq(Alias(attr("id"), "_mv_copy")()), Range(0, (n + m - 1) / m, 1, None))
    val row = attr("_mv_row")
    val firstWindow = Multiply(IntegralDivide(Add(Greatest(Seq(Literal(n), row)), Literal(m - 1)), Literal(m)), Literal(m))
    val window = Add(firstWindow, Multiply(attr("_mv_copy"), Literal(m)))
    val assigned = Project(Seq(UnresolvedStar(None), Alias(window, "_mv_window")()),
      Join(numbered, copies, Inner, None, JoinHint.NONE))
    val kept = Filter(LessThanOrEqual(attr("_mv_window"), Least(Seq(Subtract(Add(row, Literal(n)), Literal(1L)),
      attr("_mv_rows")))), assigned)
    // The window's own first and last times, not those of one key's rows in it.
    val whole = WindowSpecDefinition(Seq(attr("_mv_window")), Nil, UnspecifiedFrame)
    val bounded = Project(Seq(UnresolvedStar(None),
      Alias(WindowExpression(fn("min", c.time), whole), "_mv_window_start")(),
      Alias(WindowExpression(fn("max", c.time), whole), "_mv_window_end")()), kept)
    val (start, end) = (attr("_mv_window_start"), attr("_mv_window_end"))
    Aggregate(keys ++ Seq(attr("_mv_window"), start, end), withBounds(a, start, end), bounded)
  }

  /**
   * Without other GROUP BY keys, one window per row is a window frame: Spark's Window operator over
   * `frame`, as a hand-written `agg(...) OVER (ORDER BY ts RANGE/ROWS ...)` runs, keeping the rows
   * that close a window (`keep`). None unless every function outside window_start() and
   * window_end() is a built-in aggregate without DISTINCT or FILTER, and no column is read outside one.
   */
  private def frameRewrite(a: Aggregate, frame: WindowFrame, order: Seq[SortOrder], start: Expression,
                           end: Expression, keep: Expression, helpers: Seq[NamedExpression],
                           input: LogicalPlan): Option[LogicalPlan] = {
    val spec = WindowSpecDefinition(Nil, order, frame)
    var framable = true
    def wrap(e: Expression): Expression = e match {
      case f: UnresolvedFunction if isAggregate(f) =>
        if (f.isDistinct || f.filter.isDefined) framable = false
        WindowExpression(f, spec)
      case u: UnresolvedAttribute => framable = false; u
      case u: UnresolvedStar => framable = false; u
      case other => other.withNewChildren(other.children.map(wrap))
    }
    val windowed = a.copy(aggregateExpressions = a.aggregateExpressions.map {
      case UnresolvedAlias(child, None) => UnresolvedAlias(wrap(child), Some(e => toPrettySQL(e.transform {
        case WindowExpression(f, _) => f
      })))
      case named => wrap(named).asInstanceOf[NamedExpression]
    })
    if (!framable) return None
    val items = withBounds(windowed, start, end)
    Some(DropColumns(helpers.map(_.name), Filter(keep, Project(items ++ helpers, input))))
  }

  private def isAggregate(f: UnresolvedFunction): Boolean = f.nameParts.size == 1 &&
    FunctionRegistry.builtin.lookupFunction(FunctionIdentifier(f.nameParts.head.toLowerCase))
      .exists(_.getGroup == "agg_funcs")

  /** The select list with window_start() and window_end() replaced by the window's bounds. */
  private def withBounds(a: Aggregate, start: Expression, end: Expression): Seq[NamedExpression] = {
    val bounds = Map("window_start" -> start, "window_end" -> end)
    def bound(e: Expression): Option[(String, Expression)] = e match {
      case f: UnresolvedFunction if f.nameParts.size == 1 && f.arguments.isEmpty =>
        bounds.get(f.nameParts.head.toLowerCase).map(f.nameParts.head.toLowerCase -> _)
      case _ => None
    }
    a.aggregateExpressions.map {
      case UnresolvedAlias(f, _) if bound(f).isDefined => Alias(bound(f).get._2, bound(f).get._1)()
      case item => item.transformDown { case f if bound(f).isDefined => bound(f).get._2 }.asInstanceOf[NamedExpression]
    }
  }

  private def timeUnit(c: Call): Long = {
    val unit = c.args.head match {
      case u: UnresolvedAttribute if u.nameParts.size == 1 => u.name
      case l: Literal if l.value != null => l.value.toString
      case other => other.sql
    }
    Units.getOrElse(unit.toUpperCase, throw WindowErrors.ekuiperUnknownUnit(c.name, unit))
  }

  private def integer(c: Call, e: Expression): Long = Try(e.eval()).toOption match {
    case Some(v: java.lang.Integer) => v.longValue
    case Some(v: java.lang.Long) => v.longValue
    case Some(v: java.lang.Short) => v.longValue
    case Some(v: java.lang.Byte) => v.longValue
    case _ => throw WindowErrors.ekuiperArguments(c.name, s"${e.sql} is not an integer literal")
  }

  private def positive(c: Call, e: Expression): Long = {
    val v = integer(c, e)
    if (v <= 0) throw WindowErrors.ekuiperNotPositive(c.name, e.sql)
    v
  }

  private def nonNegative(c: Call, e: Expression): Long = {
    val v = integer(c, e)
    if (v < 0) throw WindowErrors.ekuiperNotPositive(c.name, e.sql)
    v
  }
}
