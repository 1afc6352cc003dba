package io.mvengine

import java.nio.file.Files

import scala.util.Try
import scala.util.control.NonFatal

import org.apache.spark.sql.AnalysisException
import org.apache.spark.sql.catalyst.expressions.{Add, EvalMode, Literal}

/**
 * Every error the extension raises, built in one place: the window functions' and the
 * materialized-view statements' (MV_MAINTAINER_NOT_RUNNING, MV_VIEW_READ_ONLY, and the maintainer's
 * own errors passed through with their class, text and parameters).
 *
 * Each has a stable error class (tests assert it, not the prose), the offending values as
 * parameters, and a hint saying how to fix the call. Example message:
 * {{{
 *   [MV_WINDOW_INTERVAL.NOT_POSITIVE] TUMBLE: SIZE must be a positive interval, got INTERVAL '0' MINUTE.
 *   Hint: use a duration above zero, e.g. INTERVAL '10' MINUTES.
 * }}}
 */
object WindowErrors {

  /** Every error class with its sub-classes; [[register]] makes Spark know them. */
  private val conditions: Map[String, Seq[String]] = Map(
    "MV_WINDOW_ARGUMENT" -> Seq("TOO_MANY", "MISSING", "UNKNOWN_NAME", "DUPLICATE",
      "POSITIONAL_AFTER_NAMED", "DATA_NOT_A_TABLE", "PARTITION_NOT_SUPPORTED"),
    "MV_WINDOW_TIME_COLUMN" -> Seq("NOT_A_COLUMN", "NOT_TIMESTAMP"),
    "MV_WINDOW_INTERVAL" -> Seq("NOT_CONSTANT", "NOT_DAY_TIME", "NOT_POSITIVE",
      "SIZE_NOT_MULTIPLE_OF_STEP", "TOO_MANY_WINDOWS_PER_ROW"),
    "MV_WINDOW_COLUMN_CONFLICT" -> Nil,
    "MV_EKUIPER_WINDOW" -> Seq("UNKNOWN_UNIT", "ARGUMENTS", "NOT_POSITIVE", "INTERVAL_ABOVE_SIZE",
      "BAD_OVER", "MORE_THAN_ONE", "TIME_NOT_TIMESTAMP"),
    "MV_WINDOW_DESCRIPTOR_MISPLACED" -> Nil,
    "MV_WINDOW_INTERNAL" -> Nil,
    "MV_MAINTAINER_NOT_RUNNING" -> Nil,
    "MV_VIEW_READ_ONLY" -> Nil,
    "MV_SPARK_VERSION_UNSUPPORTED" -> Nil) ++ esperConditions

  private def error(errorClass: String, message: String, hint: String,
                    params: (String, String)*): AnalysisException = {
    val Array(main, sub @ _*) = errorClass.split('.')
    require(conditions.get(main).exists(subs => sub.forall(subs.contains)), s"unknown error class $errorClass")
    SparkCompat.analysisException(s"[$errorClass] $message Hint: $hint", errorClass,
      params.toMap ++ Map("message" -> message, "hint" -> hint))
  }

  /**
   * Adds the engine's error classes to Spark's error reader, so that code re-rendering a message
   * from its class and parameters (PySpark's getMessage(), Spark re-raising an error) gets the same
   * text instead of an INTERNAL_ERROR. Spark offers no public way to do this; if the reflection
   * ever fails, errors still carry their full message and class, only re-rendering degrades.
   */
  def register(): Unit = registerJson("MV_WINDOW_INTERNAL", conditionsJson)

  private def registerJson(probe: String, json: => String): Unit = try {
    val helper = Class.forName("org.apache.spark.SparkThrowableHelper$")
    val reader = helper.getMethod("errorReader").invoke(helper.getField("MODULE$").get(null))
    val readerClass = reader.getClass
    val known = readerClass.getMethod("isValidErrorClass", classOf[String])
      .invoke(reader, probe).asInstanceOf[Boolean]
    if (!known) {
      val file = Files.createTempFile("mv-error-conditions", ".json")
      file.toFile.deleteOnExit()
      Files.writeString(file, json)
      val ours = readerClass.getConstructor(classOf[Seq[_]]).newInstance(Seq(file.toUri.toURL))
      val field = readerClass.getDeclaredField("errorInfoMap")
      field.setAccessible(true)
      field.set(reader, field.get(reader).asInstanceOf[Map[String, Any]] ++
        field.get(ours).asInstanceOf[Map[String, Any]])
    }
  } catch {
    case NonFatal(_) => ()
  }

  private def conditionsJson: String = conditions.map { case (main, subs) =>
    val body = if (subs.isEmpty) "\"message\": [\"<message> Hint: <hint>\"]"
    else {
      val subClasses = subs.map(s => s"\"$s\": {\"message\": [\"Hint: <hint>\"]}").mkString(", ")
      s"\"message\": [\"<message>\"], \"subClass\": {$subClasses}"
    }
    s"\"$main\": {$body}"
  }.mkString("{", ", ", "}")

  private def usage(kind: WindowKind): String = s"Call it as ${kind.usage}."

  def tooManyArguments(kind: WindowKind, got: Int): AnalysisException =
    error("MV_WINDOW_ARGUMENT.TOO_MANY",
      s"${kind.name} takes at most ${kind.arguments.size} arguments, got $got.", usage(kind),
      "function" -> kind.name, "given" -> got.toString)

  def missingArgument(kind: WindowKind, name: String): AnalysisException =
    error("MV_WINDOW_ARGUMENT.MISSING", s"${kind.name} needs the argument $name.", usage(kind),
      "function" -> kind.name, "argument" -> name)

  def unknownArgument(kind: WindowKind, name: String): AnalysisException =
    error("MV_WINDOW_ARGUMENT.UNKNOWN_NAME",
      s"${kind.name} has no argument named $name; its arguments are ${kind.arguments.mkString(", ")}.",
      usage(kind), "function" -> kind.name, "argument" -> name)

  def duplicateArgument(kind: WindowKind, name: String): AnalysisException =
    error("MV_WINDOW_ARGUMENT.DUPLICATE", s"${kind.name} was given the argument $name twice.",
      usage(kind), "function" -> kind.name, "argument" -> name)

  def positionalAfterNamed(kind: WindowKind): AnalysisException =
    error("MV_WINDOW_ARGUMENT.POSITIONAL_AFTER_NAMED",
      s"${kind.name} got a positional argument after a named one.",
      "Put positional arguments first, or name them all (DATA => ..., TIMECOL => ...).",
      "function" -> kind.name)

  def dataNotATable(kind: WindowKind, got: String): AnalysisException =
    error("MV_WINDOW_ARGUMENT.DATA_NOT_A_TABLE",
      s"${kind.name}: DATA must be a table, got $got.",
      "Pass TABLE(name), TABLE(SELECT ...) or a bare table name.",
      "function" -> kind.name, "given" -> got)

  def timeNotAColumn(kind: WindowKind, got: String): AnalysisException =
    error("MV_WINDOW_TIME_COLUMN.NOT_A_COLUMN",
      s"${kind.name}: TIMECOL must name one column, got $got.",
      "Pass DESCRIPTOR(column) or the bare column name.",
      "function" -> kind.name, "given" -> got)

  def timeNotTimestamp(kind: WindowKind, column: String, dataType: String): AnalysisException =
    error("MV_WINDOW_TIME_COLUMN.NOT_TIMESTAMP",
      s"${kind.name}: the time column $column is $dataType, not TIMESTAMP, TIMESTAMP_NTZ or BIGINT (epoch milliseconds).",
      s"Convert it in a subquery, e.g. TABLE(SELECT *, CAST($column AS TIMESTAMP) AS ts FROM t).",
      "function" -> kind.name, "column" -> column, "type" -> dataType)

  def intervalNotConstant(kind: WindowKind, argument: String, got: String): AnalysisException =
    error("MV_WINDOW_INTERVAL.NOT_CONSTANT",
      s"${kind.name}: $argument must be a constant interval, got $got.",
      "Use a literal such as INTERVAL '10' MINUTES.",
      "function" -> kind.name, "argument" -> argument, "given" -> got)

  def intervalNotDayTime(kind: WindowKind, argument: String, got: String): AnalysisException =
    error("MV_WINDOW_INTERVAL.NOT_DAY_TIME",
      s"${kind.name}: $argument must be a fixed duration, got the calendar interval $got.",
      "Months and years vary in length; use days, hours, minutes or seconds, e.g. INTERVAL '30' DAYS.",
      "function" -> kind.name, "argument" -> argument, "given" -> got)

  def intervalNotPositive(kind: WindowKind, argument: String, got: String): AnalysisException =
    error("MV_WINDOW_INTERVAL.NOT_POSITIVE",
      s"${kind.name}: $argument must be a positive interval, got $got.",
      "Use a duration above zero, e.g. INTERVAL '10' MINUTES.",
      "function" -> kind.name, "argument" -> argument, "given" -> got)

  def sizeNotMultipleOfStep(size: String, step: String): AnalysisException =
    error("MV_WINDOW_INTERVAL.SIZE_NOT_MULTIPLE_OF_STEP",
      s"CUMULATE: SIZE ($size) must be a whole multiple of STEP ($step).",
      "Choose a STEP that divides SIZE, e.g. STEP INTERVAL '1' HOUR with SIZE INTERVAL '1' DAY.",
      "size" -> size, "step" -> step)

  def tooManyWindowsPerRow(kind: WindowKind, count: Long, limit: Int): AnalysisException =
    error("MV_WINDOW_INTERVAL.TOO_MANY_WINDOWS_PER_ROW",
      s"${kind.name} would put each row into $count windows; at most $limit are allowed.",
      "Use a larger SLIDE or STEP relative to SIZE.",
      "function" -> kind.name, "count" -> count.toString, "limit" -> limit.toString)

  def partitionNotSupported(kind: WindowKind): AnalysisException =
    error("MV_WINDOW_ARGUMENT.PARTITION_NOT_SUPPORTED",
      s"${kind.name} takes no PARTITION BY or ORDER BY on its table; only SESSION does.",
      "Remove the PARTITION BY clause, or group by the key after the window function.",
      "function" -> kind.name)

  def columnConflict(kind: WindowKind, column: String): AnalysisException =
    error("MV_WINDOW_COLUMN_CONFLICT",
      s"${kind.name} adds the column $column, but its input already has a column of that name.",
      s"Rename or drop it in a subquery: TABLE(SELECT * EXCEPT ($column) FROM ...).",
      "function" -> kind.name, "column" -> column)

  def descriptorMisplaced(): AnalysisException =
    error("MV_WINDOW_DESCRIPTOR_MISPLACED",
      "DESCRIPTOR(column) is only valid as the TIMECOL argument of a window table function.",
      "Write it inside TUMBLE, HOP, CUMULATE or SESSION, e.g. TUMBLE(TABLE(t), DESCRIPTOR(ts), ...).")

  def notRewritten(name: String): AnalysisException =
    error("MV_WINDOW_INTERNAL",
      s"The window table function $name reached Spark's function registry without being rewritten.",
      "This is a bug in the engine's Spark extension; please report the query.",
      "function" -> name)

  private val ekuiperUsage = "Call it as TUMBLINGWINDOW(unit, size), HOPPINGWINDOW(unit, size, hop), " +
    "SLIDINGWINDOW(unit, size[, delay]), SESSIONWINDOW(unit, maxDuration, timeout) or COUNTWINDOW(n[, m])."

  def ekuiperUnknownUnit(function: String, unit: String): AnalysisException =
    error("MV_EKUIPER_WINDOW.UNKNOWN_UNIT", s"$function: unknown time unit $unit.",
      "Use one of DD, HH, MI, SS, MS, e.g. TUMBLINGWINDOW(ss, 10).", "function" -> function, "unit" -> unit)

  def ekuiperArguments(function: String, problem: String): AnalysisException =
    error("MV_EKUIPER_WINDOW.ARGUMENTS", s"$function: $problem.", ekuiperUsage,
      "function" -> function, "problem" -> problem)

  def ekuiperNotPositive(function: String, got: String): AnalysisException =
    error("MV_EKUIPER_WINDOW.NOT_POSITIVE", s"$function: sizes must be positive integers, got $got.",
      "Use a whole number above zero, e.g. COUNTWINDOW(5) or TUMBLINGWINDOW(ss, 10).",
      "function" -> function, "given" -> got)

  def ekuiperIntervalAboveSize(n: Long, m: Long): AnalysisException =
    error("MV_EKUIPER_WINDOW.INTERVAL_ABOVE_SIZE",
      s"COUNTWINDOW($n, $m): the interval $m is larger than the window length $n.",
      "eKuiper requires interval <= length, e.g. COUNTWINDOW(5, 2).", "count" -> n.toString, "interval" -> m.toString)

  def ekuiperBadOver(function: String): AnalysisException =
    error("MV_EKUIPER_WINDOW.BAD_OVER", s"$function: only SLIDINGWINDOW takes OVER(WHEN condition).",
      "Write SLIDINGWINDOW(ss, 1) OVER(WHEN cond), or move the condition into FILTER(WHERE ...).",
      "function" -> function)

  def ekuiperMoreThanOne(functions: Seq[String]): AnalysisException =
    error("MV_EKUIPER_WINDOW.MORE_THAN_ONE",
      s"GROUP BY has ${functions.size} window functions (${functions.mkString(", ")}); at most one is allowed.",
      "Keep one window function; group by other columns as usual.", "functions" -> functions.mkString(", "))

  def ekuiperTimeNotTimestamp(column: String, dataType: String): AnalysisException =
    error("MV_EKUIPER_WINDOW.TIME_NOT_TIMESTAMP",
      s"The event time column $column is $dataType, not TIMESTAMP, TIMESTAMP_NTZ or BIGINT (epoch milliseconds).",
      s"Name another column with TIMECOL => column, or set ${EkuiperWindows.TimestampConf}.",
      "column" -> column, "type" -> dataType)

  /**
   * A BIGINT sum over a sliding window past BIGINT's range under ANSI mode: the error Spark's window
   * frame raises there (ARITHMETIC_OVERFLOW, from its ANSI addition). Spark keeps that exception's
   * class to itself, so its own addition builds it.
   */
  def slidingSumOverflow(): Throwable =
    Try(Add(Literal(Long.MaxValue), Literal(1L), EvalMode.ANSI).eval()).failed.get

  // Esper data windows (EsperDataWindows.scala) and derived-value aggregates (EsperAggregates.scala).
  // Argument errors reuse the classes above; what only Esper's windows can get wrong has its own.

  private def esperConditions: Map[String, Seq[String]] = Map(
    "MV_ESPER_WINDOW" -> Seq("COUNT_NOT_CONSTANT", "COUNT_NOT_POSITIVE", "COUNT_TOO_LARGE", "BAD_REFERENCE_POINT",
      "UNKNOWN_FLOW_CONTROL", "SORT_CRITERIA_MISSING", "KEYS_NOT_COLUMNS", "STATEFUL_EXPRESSION",
      "NOT_A_ROW_CONDITION", "NOT_A_BOOLEAN_CONSTANT"),
    "MV_ESPER_AGGREGATE" -> Seq("WRONG_ARGUMENTS", "NOT_NUMERIC"))

  private def esperUsage(kind: EsperWindowKind): String = s"Call it as ${kind.usage}."

  def esperTooManyArguments(kind: EsperWindowKind, got: Int): AnalysisException =
    error("MV_WINDOW_ARGUMENT.TOO_MANY", s"${kind.name} takes at most ${kind.arguments.size} arguments, got $got.",
      esperUsage(kind), "function" -> kind.name, "given" -> got.toString)

  def esperMissingArgument(kind: EsperWindowKind, name: String): AnalysisException =
    error("MV_WINDOW_ARGUMENT.MISSING", s"${kind.name} needs the argument $name.", esperUsage(kind),
      "function" -> kind.name, "argument" -> name)

  def esperUnknownArgument(kind: EsperWindowKind, name: String): AnalysisException =
    error("MV_WINDOW_ARGUMENT.UNKNOWN_NAME",
      s"${kind.name} has no argument named $name; its arguments are ${kind.arguments.mkString(", ")}.",
      esperUsage(kind), "function" -> kind.name, "argument" -> name)

  def esperDuplicateArgument(kind: EsperWindowKind, name: String): AnalysisException =
    error("MV_WINDOW_ARGUMENT.DUPLICATE", s"${kind.name} was given the argument $name twice.",
      esperUsage(kind), "function" -> kind.name, "argument" -> name)

  def esperPositionalAfterNamed(kind: EsperWindowKind): AnalysisException =
    error("MV_WINDOW_ARGUMENT.POSITIONAL_AFTER_NAMED", s"${kind.name} got a positional argument after a named one.",
      "Put positional arguments first, or name them all (DATA => ..., TIMECOL => ...).", "function" -> kind.name)

  def esperDataNotATable(kind: EsperWindowKind, got: String): AnalysisException =
    error("MV_WINDOW_ARGUMENT.DATA_NOT_A_TABLE", s"${kind.name}: DATA must be a table, got $got.",
      "Pass TABLE(name), TABLE(SELECT ...) or a bare table name.", "function" -> kind.name, "given" -> got)

  def esperTimeNotAColumn(kind: EsperWindowKind, got: String): AnalysisException =
    error("MV_WINDOW_TIME_COLUMN.NOT_A_COLUMN", s"${kind.name}: TIMECOL must name one column, got $got.",
      "Pass DESCRIPTOR(column) or the bare column name.", "function" -> kind.name, "given" -> got)

  def esperTimeNotTimestamp(kind: EsperWindowKind, column: String, dataType: String): AnalysisException =
    error("MV_WINDOW_TIME_COLUMN.NOT_TIMESTAMP",
      s"${kind.name}: the time column $column is $dataType, not TIMESTAMP or TIMESTAMP_NTZ.",
      s"Convert it in a subquery, e.g. TABLE(SELECT *, CAST($column AS TIMESTAMP) AS ts FROM t).",
      "function" -> kind.name, "column" -> column, "type" -> dataType)

  def esperIntervalNotConstant(kind: EsperWindowKind, argument: String, got: String): AnalysisException =
    error("MV_WINDOW_INTERVAL.NOT_CONSTANT", s"${kind.name}: $argument must be a constant interval, got $got.",
      "Use a literal such as INTERVAL '10' SECONDS, or a number of seconds as Esper allows (10).",
      "function" -> kind.name, "argument" -> argument, "given" -> got)

  def esperIntervalNotDayTime(kind: EsperWindowKind, argument: String, got: String): AnalysisException =
    error("MV_WINDOW_INTERVAL.NOT_DAY_TIME",
      s"${kind.name}: $argument must be a fixed duration, got the calendar interval $got.",
      "Months and years vary in length; use days, hours, minutes or seconds, e.g. INTERVAL '30' DAYS.",
      "function" -> kind.name, "argument" -> argument, "given" -> got)

  def esperIntervalNotPositive(kind: EsperWindowKind, argument: String, got: String): AnalysisException =
    error("MV_WINDOW_INTERVAL.NOT_POSITIVE", s"${kind.name}: $argument must be a positive interval, got $got.",
      "Use a duration above zero, e.g. INTERVAL '10' SECONDS.",
      "function" -> kind.name, "argument" -> argument, "given" -> got)

  def esperColumnConflict(kind: EsperWindowKind, column: String): AnalysisException =
    error("MV_WINDOW_COLUMN_CONFLICT",
      s"${kind.name} adds the column $column, but its input already has a column of that name.",
      s"Rename or drop it in a subquery: TABLE(SELECT * EXCEPT ($column) FROM ...).",
      "function" -> kind.name, "column" -> column)

  def countNotConstant(kind: EsperWindowKind, argument: String, got: String): AnalysisException =
    error("MV_ESPER_WINDOW.COUNT_NOT_CONSTANT", s"${kind.name}: $argument must be a constant whole number, got $got.",
      "Write a number of rows, e.g. 10.", "function" -> kind.name, "argument" -> argument, "given" -> got)

  def countNotPositive(kind: EsperWindowKind, argument: String, got: String): AnalysisException =
    error("MV_ESPER_WINDOW.COUNT_NOT_POSITIVE", s"${kind.name}: $argument must be at least 1, got $got.",
      "Write a number of rows above zero, e.g. 10.", "function" -> kind.name, "argument" -> argument, "given" -> got)

  def countTooLarge(kind: EsperWindowKind, got: Long, limit: Int): AnalysisException =
    error("MV_ESPER_WINDOW.COUNT_TOO_LARGE",
      s"${kind.name} would put each row into $got windows; at most $limit are allowed.",
      "Aggregate over a ROWS frame instead: SUM(x) OVER (ORDER BY ts ROWS BETWEEN n - 1 PRECEDING AND CURRENT ROW).",
      "function" -> kind.name, "count" -> got.toString, "limit" -> limit.toString)

  def badReferencePoint(kind: EsperWindowKind, got: String): AnalysisException =
    error("MV_ESPER_WINDOW.BAD_REFERENCE_POINT",
      s"${kind.name}: REFERENCE must be a constant timestamp or epoch milliseconds, got $got.",
      "Write e.g. TIMESTAMP'2024-01-01 00:00:05' or 5000 (milliseconds after 1970-01-01 00:00:00 UTC).",
      "function" -> kind.name, "given" -> got)

  def unknownFlowControl(kind: EsperWindowKind, got: String): AnalysisException =
    error("MV_ESPER_WINDOW.UNKNOWN_FLOW_CONTROL",
      s"${kind.name}: FLOW_CONTROL must be a constant string of FORCE_UPDATE and START_EAGER, got $got.",
      "Write e.g. 'FORCE_UPDATE' or 'FORCE_UPDATE, START_EAGER'.", "function" -> kind.name, "given" -> got)

  def sortCriteriaMissing(kind: EsperWindowKind): AnalysisException =
    error("MV_ESPER_WINDOW.SORT_CRITERIA_MISSING", s"${kind.name} needs sort criteria: the table argument's ORDER BY.",
      "Write TABLE(t) WITH SINGLE PARTITION ORDER BY (price DESC, symbol), or PARTITION BY key ORDER BY ...",
      "function" -> kind.name)

  def keysNotColumns(kind: EsperWindowKind, got: String): AnalysisException =
    error("MV_ESPER_WINDOW.KEYS_NOT_COLUMNS", s"${kind.name}: UNIQUE must name columns, got $got.",
      "Pass DESCRIPTOR(key) or DESCRIPTOR(key1, key2).", "function" -> kind.name, "given" -> got)

  def statefulExpression(kind: EsperWindowKind, name: String, replacement: String): AnalysisException =
    error("MV_ESPER_WINDOW.STATEFUL_EXPRESSION",
      s"${kind.name}: $name is the state of a live Esper window, which a table refreshed in batch does not have.",
      s"Use $replacement, or a condition on the row's own columns.", "function" -> kind.name, "property" -> name)

  def notARowCondition(kind: EsperWindowKind, got: String): AnalysisException =
    error("MV_ESPER_WINDOW.NOT_A_ROW_CONDITION",
      s"${kind.name}: EXPRESSION must be a deterministic BOOLEAN condition on the row's columns, got $got.",
      "Aggregates, window functions and subqueries depend on a live window's state; " +
        "write a condition such as myvalue = 'postme'.", "function" -> kind.name, "given" -> got)

  def notABooleanConstant(kind: EsperWindowKind, argument: String, got: String): AnalysisException =
    error("MV_ESPER_WINDOW.NOT_A_BOOLEAN_CONSTANT", s"${kind.name}: $argument must be TRUE or FALSE, got $got.",
      "Write TRUE (the triggering row closes its batch) or FALSE (it opens the next).",
      "function" -> kind.name, "argument" -> argument, "given" -> got)

  def aggregateArguments(function: String, usage: String, got: Int): AnalysisException =
    error("MV_ESPER_AGGREGATE.WRONG_ARGUMENTS", s"$function takes ${usage.count(_ == ',') + 1} value argument(s), got $got.",
      s"Call it as $usage; for properties of the last row use max_by(column, time) beside it.",
      "function" -> function, "given" -> got.toString)

  def aggregateNotNumeric(function: String, argument: String, dataType: String): AnalysisException =
    error("MV_ESPER_AGGREGATE.NOT_NUMERIC", s"$function: $argument is $dataType, not a number.",
      s"Pass a numeric column or cast it, e.g. CAST($argument AS DOUBLE).",
      "function" -> function, "argument" -> argument, "type" -> dataType)

  // The materialized-view statements (MaterializedViewStatements.scala, ReadOnlyViews.scala).

  def maintainerNotRunning(why: String): AnalysisException = error("MV_MAINTAINER_NOT_RUNNING",
    s"Materialized-view statements need the engine's maintainer, and $why.",
    "In a Python session run `import mv; mv.attach(spark)` (mv.session() and mv.configure() do it); " +
      "SQL and Spark Connect clients connect to `python -m mv.connect_server`. Reading a view needs no maintainer.",
    "why" -> why)

  def sparkLineMismatch(running: String, built: String): AnalysisException = error("MV_SPARK_VERSION_UNSUPPORTED",
    s"This build of the engine's extension is for Spark $built, and this session runs Spark $running.",
    s"Build the extension for this Spark: `python -m mv.jars` beside pyspark $running (make setup SPARK=$running), " +
      "and put the jar it prints in spark.jars.",
    "version" -> running, "built" -> built)

  def viewReadOnly(table: String, view: String, operation: String): AnalysisException = error("MV_VIEW_READ_ONLY",
    s"$table belongs to the materialized view $view: only its refresh writes it, and $operation would make the " +
      "view differ from its query.",
    s"Change the view's sources and run REFRESH MATERIALIZED VIEW $view; to change its query, CREATE OR REPLACE it.",
    "table" -> table, "view" -> view, "operation" -> operation)

  /**
   * An error the maintainer (the Python side) raised, as Spark raises its own: class, full text
   * and parameters. Its class is added to Spark's error reader first, so re-rendering keeps the text.
   */
  def fromMaintainer(errorClass: String, text: String, params: Map[String, String]): AnalysisException = {
    registerJson(errorClass, s"{\"$errorClass\": {\"message\": [\"<text>\"]}}")
    val body = text.stripPrefix(s"[$errorClass] ")
    SparkCompat.analysisException(s"[$errorClass] $body", errorClass, params ++ Map("text" -> body))
  }
}
