package io.mvengine

import scala.collection.mutable

import org.apache.spark.sql.catalyst.analysis.{UnresolvedAttribute, UnresolvedFunction, UnresolvedRelation, UnresolvedTableValuedFunction}
import org.apache.spark.sql.catalyst.expressions.{AttributeReference, Expression, FunctionTableSubqueryArgumentExpression, IsNotNull, NamedArgumentExpression}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LogicalPlan}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{CalendarIntervalType, DataType, DayTimeIntervalType, LongType, TimestampNTZType, TimestampType, YearMonthIntervalType}
import org.apache.spark.unsafe.types.CalendarInterval

/**
 * Turns `TUMBLE(...)`, `HOP(...)`, `CUMULATE(...)` and `SESSION(...)` in a FROM clause into a
 * [[WindowTableFunction]], in two rules:
 *  1. [[ResolveWindowTableFunctions.Bind]] binds the call's arguments to names, accepting Flink's
 *     and RisingWave's forms: `TABLE(t)`, `TABLE(SELECT ...)` or a bare table name for DATA;
 *     `DESCRIPTOR(c)` or a bare column for TIMECOL; positional or named (`SIZE => ...`) arguments.
 *     [[WindowSqlParser]] applies it to every parsed statement, before Spark resolves anything:
 *     otherwise, in a correlated subquery, Spark would resolve `DESCRIPTOR(c)` against the outer
 *     query and call it as a scalar function. It also runs as a resolution rule, for plans that
 *     do not come from SQL text;
 *  2. [[ResolveWindowTableFunctions.Validate]], once Spark has resolved the arguments against the
 *     table, checks them (a timestamp time column, constant positive day-time intervals,
 *     CUMULATE's size a multiple of its step) and builds the node.
 */
object ResolveWindowTableFunctions {

  /** How many windows a single row may fall into (HOP's size/slide, CUMULATE's size/step). */
  val MaxWindowsPerRow = 10000

  object Bind extends Rule[LogicalPlan] {
    override def apply(plan: LogicalPlan): LogicalPlan = plan.transformUpWithSubqueries {
      case call: UnresolvedTableValuedFunction if WindowKind.find(call.name).isDefined =>
        bind(WindowKind.find(call.name).get, call.functionArgs)
    }
  }

  object Validate extends Rule[LogicalPlan] {
    override def apply(plan: LogicalPlan): LogicalPlan = plan.resolveOperatorsUp {
      case call: WindowTableFunctionCall if call.child.resolved && call.expressions.forall(_.resolved) =>
        resolve(call)
    }
  }

  private def bind(kind: WindowKind, args: Seq[Expression]): WindowTableFunctionCall = {
    val bound = mutable.LinkedHashMap[String, Expression]()
    var named = false
    args.zipWithIndex.foreach {
      case (NamedArgumentExpression(key, value), _) =>
        val name = key.toUpperCase
        if (!kind.arguments.contains(name)) throw WindowErrors.unknownArgument(kind, key)
        if (bound.contains(name)) throw WindowErrors.duplicateArgument(kind, name)
        named = true
        bound(name) = value
      case (value, position) =>
        if (named) throw WindowErrors.positionalAfterNamed(kind)
        if (position >= kind.arguments.size) throw WindowErrors.tooManyArguments(kind, args.size)
        bound(kind.arguments(position)) = value
    }
    kind.arguments.take(kind.required).find(!bound.contains(_))
      .foreach(missing => throw WindowErrors.missingArgument(kind, missing))
    val (child, partitionBy) = dataArgument(kind, bound("DATA"))
    val paramNames = kind.arguments.drop(2).filter(bound.contains)
    WindowTableFunctionCall(kind, timeArgument(kind, bound("TIMECOL")), partitionBy, paramNames,
      paramNames.map(bound), child)
  }

  private def dataArgument(kind: WindowKind, arg: Expression): (LogicalPlan, Seq[Expression]) =
    arg match {
      case table: FunctionTableSubqueryArgumentExpression =>
        val partitioned = table.partitionByExpressions.nonEmpty || table.withSinglePartition ||
          table.orderByExpressions.nonEmpty
        if (partitioned && !kind.isSession) throw WindowErrors.partitionNotSupported(kind)
        (table.plan, table.partitionByExpressions)
      case name: UnresolvedAttribute => (UnresolvedRelation(name.nameParts), Nil)
      case other => throw WindowErrors.dataNotATable(kind, other.sql)
    }

  private def timeArgument(kind: WindowKind, arg: Expression): Expression = arg match {
    case f: UnresolvedFunction if f.nameParts.map(_.toLowerCase) == Seq("descriptor") =>
      f.arguments match {
        case Seq(column: UnresolvedAttribute) => column
        case _ => throw WindowErrors.timeNotAColumn(kind, f.sql)
      }
    case column: UnresolvedAttribute => column
    case other => throw WindowErrors.timeNotAColumn(kind, other.sql)
  }

  private def resolve(call: WindowTableFunctionCall): WindowTableFunction = {
    val kind = call.kind
    val time = call.timeColumn
    if (!time.references.subsetOf(call.child.outputSet) || time.references.isEmpty) {
      throw WindowErrors.timeNotAColumn(kind, time.sql)
    }
    val zone = time.dataType match {
      case TimestampType => Some(SQLConf.get.sessionLocalTimeZone)
      case TimestampNTZType => None
      case LongType => Some(SQLConf.get.sessionLocalTimeZone)  // epoch milliseconds: an instant
      case other => throw WindowErrors.timeNotTimestamp(kind, time.sql, other.sql)
    }
    val spec = windowSpec(call, zone)
    if (spec.windowsPerRow > MaxWindowsPerRow) {
      throw WindowErrors.tooManyWindowsPerRow(kind, spec.windowsPerRow, MaxWindowsPerRow)
    }
    val resolver = SQLConf.get.resolver
    for (name <- WindowTableFunction.columnNames; column <- call.child.output) {
      if (resolver(column.name, name)) throw WindowErrors.columnConflict(kind, column.name)
    }
    val windowOutput = WindowTableFunction.columnNames.map(
      name => AttributeReference(name, time.dataType, nullable = false)())
    WindowTableFunction(spec, time, call.partitionBy, windowOutput, Nil,
      Filter(IsNotNull(time), call.child))
  }

  private def windowSpec(call: WindowTableFunctionCall, zone: Option[String]): WindowSpec = {
    def micros(name: String): Long = intervalMicros(call.kind, name, call.param(name).get)
    val offset = call.param("OFFSET").map(intervalMicros(call.kind, "OFFSET", _, allowNegative = true))
      .getOrElse(0L)
    call.kind match {
      case WindowKind.Tumble =>
        val size = micros("SIZE")
        WindowSpec(call.kind, size, size, Math.floorMod(offset, size), zone)
      case WindowKind.Hop =>
        val (slide, size) = (micros("SLIDE"), micros("SIZE"))
        WindowSpec(call.kind, size, slide, Math.floorMod(offset, slide), zone)
      case WindowKind.Cumulate =>
        val (step, size) = (micros("STEP"), micros("SIZE"))
        if (size % step != 0) {
          throw WindowErrors.sizeNotMultipleOfStep(call.param("SIZE").get.sql, call.param("STEP").get.sql)
        }
        WindowSpec(call.kind, size, step, Math.floorMod(offset, size), zone)
      case WindowKind.Session =>
        val gap = micros("GAP")
        WindowSpec(call.kind, gap, gap, 0L, zone)
      case WindowKind.EkuiperSession =>
        WindowSpec(call.kind, micros("SIZE"), micros("GAP"), 0L, zone)
    }
  }

  /** A constant day-time interval in microseconds; months and years have no fixed length. */
  private def intervalMicros(kind: WindowKind, name: String, e: Expression,
                             allowNegative: Boolean = false): Long = {
    if (!e.foldable) throw WindowErrors.intervalNotConstant(kind, name, e.sql)
    val micros = (e.dataType, e.eval()) match {
      case (_, null) => throw WindowErrors.intervalNotConstant(kind, name, e.sql)
      case (_: DayTimeIntervalType, value: java.lang.Long) => value.longValue
      case (CalendarIntervalType, value: CalendarInterval) =>
        if (value.months != 0) throw WindowErrors.intervalNotDayTime(kind, name, e.sql)
        value.days * 86400000000L + value.microseconds
      case (_: YearMonthIntervalType, _) => throw WindowErrors.intervalNotDayTime(kind, name, e.sql)
      case (other: DataType, _) => throw WindowErrors.intervalNotConstant(kind, name, s"${e.sql} (${other.sql})")
    }
    if (micros <= 0 && !allowNegative) throw WindowErrors.intervalNotPositive(kind, name, e.sql)
    micros
  }
}
