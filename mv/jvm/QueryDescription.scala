package io.mvengine

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.ObjectMapper

import org.apache.spark.sql.catalyst.catalog.HiveTableRelation
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeReference, AttributeSet, Cast, DateFormatClass,
  DenseRank, EqualNullSafe, EqualTo, ExprId, Expression, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual,
  Literal, NamedExpression, PredicateHelper, Rank, RowNumber, TruncTimestamp, WindowExpression}
import org.apache.spark.sql.catalyst.plans.{Cross, Inner, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical._
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.datasources.LogicalRelation
import org.apache.spark.sql.types.{DataType, StringType, TimestampNTZType, TimestampType}

/**
 * What a query means to the maintainer, read off Spark's analysed plan rather than its text:
 * its sources, its window functions, which output columns carry window_start/window_end, its
 * grouping keys, and why it could not be kept incrementally (reason codes).
 *
 * Exposed in SQL, so it works over Spark Connect too:
 * {{{
 *   SELECT description FROM mv_describe('SELECT ... FROM TUMBLE(...) GROUP BY ...')
 * }}}
 * Shapes: `window` (every output row belongs to one window of a window function and depends only
 * on source rows in that window's time range), `aggregate` (GROUP BY without windows), `partitions`
 * (OVER (PARTITION BY ...) at the top: top-N, deduplication), `rows` (none of these, every operator
 * with a delta rule: DeltaRules.scala, whose steps `maintenance` lists), `other` (refreshed in full).
 */
object QueryDescription extends PredicateHelper {

  val functionName = "mv_describe"

  def registration: (org.apache.spark.sql.catalyst.FunctionIdentifier,
      org.apache.spark.sql.catalyst.expressions.ExpressionInfo, Seq[Expression] => LogicalPlan) = (
    org.apache.spark.sql.catalyst.FunctionIdentifier(functionName),
    new org.apache.spark.sql.catalyst.expressions.ExpressionInfo(getClass.getName, null, functionName,
      "mv_describe(query) - Describes a query for the materialized-view maintainer, as JSON.", ""),
    (args: Seq[Expression]) => args match {
      case Seq(text: Literal) if text.dataType == StringType && text.value != null => describe(text.toString)
      case _ => throw new IllegalArgumentException("mv_describe takes one string literal: the query")
    })

  private def describe(queryText: String): LogicalPlan =
    LocalRelation.fromExternalRows(
      Seq(AttributeReference("description", StringType, nullable = false)()),
      Seq(org.apache.spark.sql.Row(describeJson(SparkSession.active, queryText))))

  /** `mv_describe`'s description, for the maintainer in the driver's own Python process, which
   *  calls it through py4j (mv/query.py): without the SQL statement around it, a parse, an
   *  analysis and a Spark SQL execution of their own (about 20 ms).
   *  {{{
   *    QueryDescription.describeJson(spark, "SELECT ... FROM TUMBLE(...) GROUP BY ...")  ==  {"shape": ...}
   *  }}} */
  def describeJson(session: SparkSession, queryText: String): String = Maintainer.asActive(session) {
    val parsed = session.sessionState.sqlParser.parsePlan(queryText)
    val analysed = session.sessionState.executePlan(parsed).analyzed
    new ObjectMapper().writeValueAsString(toJava(describePlan(analysed)))
  }

  def describePlan(plan: LogicalPlan): Map[String, Any] = {
    val reasons = mutable.LinkedHashSet[String]()
    val windows = plan.collect { case w: WindowTableFunction => w }
    val roles = windowRoles(plan)
    val kinds = aggregateKinds(plan)
    val combinable = kinds.nonEmpty && plan.output.forall(a => kinds.contains(a.exprId))
    val output = plan.output.map(a => Map("name" -> a.name, "type" -> a.dataType.simpleString,
      "window_role" -> roles.get(a.exprId).orNull, "aggregate" -> kinds.get(a.exprId).orNull))
    if (!plan.deterministic || plan.exists(!_.expressions.forall(_.deterministic))) reasons += "NONDETERMINISTIC"
    if (plan.exists(_.expressions.exists(DeltaRules.readsClock))) reasons += "READS_CURRENT_TIME"
    if (plan.exists(_.isInstanceOf[GlobalLimit]) || plan.exists(_.isInstanceOf[LocalLimit])) reasons += "LIMIT"
    if (plan.exists(_.expressions.exists(_.exists(_.isInstanceOf[org.apache.spark.sql.catalyst.expressions.SubqueryExpression])))) {
      reasons += "SUBQUERY"
    }
    var maintenance = Seq.empty[DeltaRules.Step]
    val outputRoles = plan.output.flatMap(a => roles.get(a.exprId)).toSet
    val windowed = outputRoles.contains("window_start") && outputRoles.contains("window_end")
    // Each operator keeping a windowed query from going window by window, with its code: the
    // reasons, and EXPLAIN's rows (windowSteps).
    lazy val blockers = windowBlockers(plan, windows)
    // Kept window by window (or refreshed in full), not by the groups the change reaches.
    def byWindows = maintenance.isEmpty || DeltaRules.reasons(maintenance).nonEmpty
    val shape = if (windows.nonEmpty && windowed) {
      val found = blockers.map(_._2).distinct
      // Windows over joins or unions, grouped: their groups are found by the change, as a GROUP BY's.
      if (found.nonEmpty && found.forall(joinedWindowReasons.contains) && groupBy(plan).isDefined) {
        maintenance = groupsByChange(plan)
      }
      if (byWindows) reasons ++= found
      "window"
    } else if (windows.isEmpty && (topAggregate(plan).isDefined || topDistinct(plan).isDefined)) {
      // Through OVER (...) functions (Esper's data windows among them) a row's result depends on
      // other rows, so neither signed partial aggregates nor recomputing changed keys is exact.
      if (plan.exists(p => p.isInstanceOf[Window] || p.isInstanceOf[EsperTimeLengthBatch])) {
        reasons += "ROWS_DEPEND_ON_OTHER_ROWS"
      }
      maintenance = groupsByChange(plan)
      "aggregate"
    } else if (windows.isEmpty && partitionBy(plan).isDefined) {
      // OVER (PARTITION BY ...) at the top (top-N, deduplication): the partitions the change reaches
      // are recomputed, their keys found as a GROUP BY's are (DeltaRules' rules for finding keys).
      maintenance = partitionsByChange(plan)
      val missing = DeltaRules.reasons(maintenance)
      reasons ++= missing
      if (missing.isEmpty) "partitions" else "other"
    } else {
      // Rows: kept by the delta rules when every operator has one (DeltaRules.scala), windows whose
      // bounds the output leaves out among them (below an aggregate: their touched groups).
      maintenance = DeltaRules.steps(plan)
      val missing = DeltaRules.reasons(maintenance)
      reasons ++= missing
      if (missing.isEmpty) "rows" else "other"
    }
    // EXPLAIN's operator rows: the delta rules' steps, or a query's window by window.
    val explained = if (shape == "window" && byWindows) {
      windowSteps(plan, windows, blockers, reasons.toSet, combinable)
    } else maintenance
    Map(
      "shape" -> shape,
      "sources" -> sources(plan, reasons, shape == "rows"),
      "temporary_views" -> temporaryViews(plan),
      "windows" -> windows.map(describeWindow),
      "output" -> output,
      "group_by" -> groupBy(plan).orNull,
      "partition_by" -> (if (shape == "partitions") partitionBy(plan).orNull else null),
      "combinable" -> combinable,
      "reasons" -> reasons.toSeq,
      "maintenance" -> maintenance.map(_.toMap),
      "explained" -> explained.map(_.toMap),
      "keys_by_change" -> (shape != "rows" && maintenance.nonEmpty && DeltaRules.reasons(maintenance).isEmpty),
      "keys_from_source" -> (shape == "aggregate" && keysFromSource(plan)),
      "views_fingerprint" -> viewsFingerprint(plan).orNull)
  }

  /**
   * A hash of the definitions of the SQL views (temporary or catalog) the query reads, nested ones
   * included: a view's name, where its text resolves and its text (or, for a view kept as a plan,
   * its schema). None when the query reads no SQL view. A refresh compares it with the one its
   * state keeps: another definition refreshes in full (QUERY_DEFINITION_CHANGED), read here from
   * the analysis mv_describe does anyway, so an ordinary refresh runs no more Spark work.
   */
  private def viewsFingerprint(plan: LogicalPlan): Option[String] = {
    val definitions = plan.collectWithSubqueries { case v: View =>
      Seq(v.desc.identifier.unquotedString, v.isTempView.toString, v.desc.viewCatalogAndNamespace.mkString("."),
        v.desc.viewText.getOrElse(v.child.schema.catalogString)).mkString("\u0000")
    }.distinct.sorted
    if (definitions.isEmpty) None
    else Some(java.security.MessageDigest.getInstance("SHA-256")
      .digest(definitions.mkString("\u0001").getBytes(java.nio.charset.StandardCharsets.UTF_8))
      .map(b => f"$b%02x").mkString)
  }

  private def describeWindow(w: WindowTableFunction): Map[String, Any] = Map(
    "kind" -> w.spec.kind.name,
    "size" -> w.spec.size, "step" -> w.spec.step, "offset" -> w.spec.offset,
    "time_zone" -> w.spec.timeZone.orNull, "fixed_offset" -> w.spec.fixedZoneOffsetMicros.isDefined,
    "time_column" -> (w.timeColumn match { case a: Attribute => a.name; case e => e.sql }),
    "own_time" -> ownTime(w),
    "partition_by" -> w.partitionBy.map { case a: Attribute => a.name; case e => e.sql },
    "sources" -> w.child.collectLeaves().flatMap(tableName))

  /**
   * Whether a window function's time column is a column of a relation it reads with that
   * relation's values: passed through or renamed (a SQL view's column, cast to its own type,
   * too), not computed. Only then does a changed source row fall in the windows its own column
   * says, which the refresh finds from the change (`ts - INTERVAL 30 MINUTES AS ts` over a
   * source column `ts` does not: its rows fall half an hour earlier).
   */
  private def ownTime(w: WindowTableFunction): Boolean = w.timeColumn match {
    case time: Attribute =>
      val found = mutable.Set[ExprId]() ++= w.child.collectLeaves().flatMap(_.output.map(_.exprId))
      w.child.foreachUp(_.expressions.foreach {
        case alias @ Alias(a: Attribute, _) if found.contains(a.exprId) => found += alias.exprId
        case alias @ Alias(cast: Cast, _) => cast.child match {
          case a: Attribute if found.contains(a.exprId) && cast.dataType == a.dataType => found += alias.exprId
          case _ =>
        }
        case _ =>
      })
      found.contains(time.exprId)
    case _ => false
  }

  /**
   * ExprIds that carry a window function's window_start / window_end / window_time, or a SESSION
   * key (`session_key`: the attribute its PARTITION BY names, passed through or renamed).
   */
  private def windowRoles(plan: LogicalPlan): Map[ExprId, String] = traced(plan, plan.collect {
    case w: WindowTableFunction =>
      w.windowOutput.map(_.exprId).zip(WindowTableFunction.columnNames) ++
        w.partitionBy.collect { case a: Attribute if w.spec.kind.name == "SESSION" => a.exprId -> "session_key" }
  }.flatten.toMap)

  /**
   * For a relation `leaf` read under aggregates of a query of rows, when each of those aggregates
   * groups by the bounds of a TUMBLE, HOP or CUMULATE window over `leaf`'s own time column: that
   * column and the longest such window's size (micros). Each group then lies in one window, so the
   * groups a change reaches lie within its rows' times -/+ that size, and a regroup term reads only
   * that range of the source (mv/row_refresh.py). None otherwise.
   */
  private def regroupWindow(plan: LogicalPlan, leaf: LogicalPlan): Option[Map[String, Any]] = {
    val found = DeltaRules.regroupingsOf(plan, leaf).map { a =>
      val windows = a.collect {
        case w: WindowTableFunction if w.child.exists(_ == leaf) && w.spec.kind.isPerRow &&
          (w.timeColumn match { case t: Attribute => leaf.outputSet.contains(t); case _ => false }) => w
      }
      val bounds = traced(a, windows.flatMap(w => Seq(w.windowStart.exprId -> w, w.windowEnd.exprId -> w)).toMap)
      val keys = a match {
        case g: Aggregate => g.groupingExpressions
        case other => other.output
      }
      keys.collectFirst { case k: Attribute if bounds.contains(k.exprId) => bounds(k.exprId) }
    }
    if (found.isEmpty || found.exists(_.isEmpty) || found.flatten.map(_.timeColumn).distinct.size != 1) None
    else Some(Map("time_column" -> found.flatten.head.timeColumn.asInstanceOf[Attribute].name,
      "size" -> found.flatten.map(_.spec.size).max))
  }

  /** `seeds`, plus every attribute that is a plain alias of one of them, with its seed's value. */
  private def traced[T](plan: LogicalPlan, seeds: Map[ExprId, T]): Map[ExprId, T] = {
    val found = mutable.Map[ExprId, T]() ++= seeds
    plan.foreachUp(_.expressions.foreach {
      case alias @ Alias(a: Attribute, _) if found.contains(a.exprId) => found(alias.exprId) = found(a.exprId)
      case _ =>
    })
    found.toMap
  }

  /**
   * Why rows over SESSION cannot be kept session by session. The refresh finds the sessions a
   * change reaches from the view's own rows, so every session must keep a row in the view (a
   * filter above the sessions may only be a Top-N limit on ROW_NUMBER, RANK or DENSE_RANK, which
   * keeps rank 1), and an OVER must see one session's rows only (partitioned by the keys too:
   * sessions of different keys can have equal bounds).
   */
  private def sessionReasons(plan: LogicalPlan, session: WindowTableFunction, joined: Boolean): Seq[(LogicalPlan, String)] = {
    val keys = session.partitionBy.collect { case a: Attribute => a.exprId }
    val lineage = traced(plan, keys.map(k => k -> k).toMap)
    val ranks = traced(plan, plan.collect { case w: Window => w.windowExpressions.collect {
      case al @ Alias(WindowExpression(_: RowNumber | _: Rank | _: DenseRank, _), _) => al.exprId -> true
    } }.flatten.toMap)
    def byKeys(spec: Seq[Expression]): Boolean = keys.forall(k => spec.exists {
      case a: Attribute => lineage.get(a.exprId).contains(k)
      case _ => false
    })
    val reasons = mutable.ArrayBuffer[(LogicalPlan, String)]()
    plan.foreach {
      case w: Window if w.exists(_ eq session) && !byKeys(w.partitionSpec) => reasons += w -> "SESSION_OVER_NOT_BY_KEYS"
      // Joined sessions find their regions from the sources, not from the view: filters are fine.
      case f: Filter if !joined && f.exists(_ eq session) && !keepsRankOne(f.condition, ranks.keySet) =>
        reasons += f -> "SESSION_ROWS_FILTERED"
      case g: Generate if !joined && g.exists(_ eq session) && !g.outer => reasons += g -> "SESSION_ROWS_FILTERED"
      case _ =>
    }
    reasons.toSeq
  }

  /**
   * Whether two SESSION windows are joined on their keys, key by key under the same names (a
   * changed session then moves only the joined rows of its own key).
   */
  private def joinedOnKeys(plan: LogicalPlan, left: WindowTableFunction, right: WindowTableFunction): Boolean = {
    def attributes(w: WindowTableFunction) = w.partitionBy.collect { case a: Attribute => a }
    val (l, r) = (attributes(left), attributes(right))
    val sameNames = l.size == left.partitionBy.size && r.size == right.partitionBy.size &&
      l.map(_.name.toLowerCase) == r.map(_.name.toLowerCase)
    val lineage = traced(plan, (l.map(_.exprId).zipWithIndex ++ r.map(_.exprId).zipWithIndex.map {
      case (id, i) => id -> -(i + 1) }).toMap)
    val conditions = plan.collect { case j: Join => j.condition.toSeq.flatMap(splitConjunctivePredicates) }.flatten
    val equated = conditions.collect {
      case EqualTo(a: Attribute, b: Attribute) => (lineage.get(a.exprId), lineage.get(b.exprId))
      case EqualNullSafe(a: Attribute, b: Attribute) => (lineage.get(a.exprId), lineage.get(b.exprId))
    }.collect { case (Some(x), Some(y)) => Set(x, y) }.toSet
    sameNames && l.indices.forall(i => equated.contains(Set(i, -(i + 1))))
  }

  /** Whether `condition` is a conjunction of Top-N limits (rn <= n, rn < n, rn = 1) on `ranks`. */
  private def keepsRankOne(condition: Expression, ranks: Set[ExprId]): Boolean = {
    object Rank1 {
      def unapply(e: Expression): Option[Boolean] = e match {
        case a: Attribute => Some(ranks.contains(a.exprId))
        case c: Cast if c.child.isInstanceOf[Attribute] => Some(ranks.contains(c.child.asInstanceOf[Attribute].exprId))
        case _ => None
      }
    }
    object Number {
      def unapply(e: Expression): Option[Long] = e match {
        case Literal(v: Int, _) => Some(v.toLong)
        case Literal(v: Long, _) => Some(v)
        case c: Cast => unapply(c.child)
        case _ => None
      }
    }
    splitConjunctivePredicates(condition).forall {
      case LessThanOrEqual(Rank1(true), Number(n)) => n >= 1
      case GreaterThanOrEqual(Number(n), Rank1(true)) => n >= 1
      case LessThan(Rank1(true), Number(n)) => n > 1
      case GreaterThan(Number(n), Rank1(true)) => n > 1
      case EqualTo(Rank1(true), Number(n)) => n == 1
      case EqualTo(Number(n), Rank1(true)) => n == 1
      case _ => false
    }
  }

  /** What keeps a grouped window from being kept window by window, but not from its groups being found by the change. */
  private val joinedWindowReasons =
    Set("JOIN_NOT_ON_WINDOW", "WINDOW_OVER_SEVERAL_SOURCES", "WINDOW_INPUT_NOT_ROW_BY_ROW", "SET_OPERATION")

  /**
   * Each operator that keeps a windowed query from being kept window by window, with its reason
   * code, in the order they are reported (the first is a full refresh's reason; each code once
   * makes the view's reasons): EXPLAIN names the operator (`windowSteps`).
   */
  private def windowBlockers(plan: LogicalPlan, windows: Seq[WindowTableFunction]): Seq[(LogicalPlan, String)] = {
    val found = mutable.ArrayBuffer[(LogicalPlan, String)]()
    val windowStarts = windows.map(_.windowStart.exprId).toSet
    val roles = windowRoles(plan)
    def isStart(e: Expression): Boolean = e match {
      case a: Attribute => roles.get(a.exprId).contains("window_start") || windowStarts.contains(a.exprId)
      case _ => false
    }
    def isEnd(e: Expression): Boolean = e match {
      case a: Attribute => roles.get(a.exprId).contains("window_end")
      case _ => false
    }
    plan.foreach {
      // OVER (PARTITION BY window_start, window_end ...), as Flink's window Top-N and deduplication
      // write it, sees one window's rows only; any other partitioning mixes windows.
      case w: Window if !(w.partitionSpec.exists(isStart) && w.partitionSpec.exists(isEnd)) =>
        found += w -> "OVER_NOT_BY_WINDOW"
      case a: Aggregate if !a.groupingExpressions.exists(isStart) && a.exists(_.isInstanceOf[WindowTableFunction]) =>
        found += a -> "AGGREGATE_NOT_BY_WINDOW"
      case j: Join if !j.condition.exists(_.exists(e => isStart(e))) => found += j -> "JOIN_NOT_ON_WINDOW"
      case p @ (_: Union | _: Intersect | _: Except) => found += p -> "SET_OPERATION"
      case _ =>
    }
    val sessions = windows.filter(_.spec.kind.name == "SESSION")
    sessions.foreach(s => found ++= sessionReasons(plan, s, joined = sessions.size > 1))
    if (sessions.size == 2 && !joinedOnKeys(plan, sessions(0), sessions(1))) {
      val joining = plan.collect { case j: Join if sessions.forall(s => j.exists(_ eq s)) => j }.lastOption
      found += joining.getOrElse(plan) -> "SESSION_JOIN_NOT_ON_KEYS"
    }
    windows.foreach { w =>
      if (w.child.collectLeaves().flatMap(tableName).size != 1) found += w -> "WINDOW_OVER_SEVERAL_SOURCES"
      w.child.foreach {
        case _: Project | _: Filter | _: SubqueryAlias | _: View | _: LeafNode =>
        case p => found += p -> "WINDOW_INPUT_NOT_ROW_BY_ROW"
      }
    }
    found.toSeq
  }

  /**
   * EXPLAIN's steps for a query kept window by window (mv/window_refresh.py, mv/session_refresh.py):
   * each operator, top first, with how a change reaches the view through it, or the reason code
   * that makes the view refresh in full (`blockers`: windowBlockers', or one of the plan's `reasons` its
   * operator causes: a non-deterministic function, LIMIT). Operators above the window function
   * are recomputed over the windows the change touches; those below it pass rows through.
   */
  private def windowSteps(plan: LogicalPlan, windows: Seq[WindowTableFunction],
      blockers: Seq[(LogicalPlan, String)], reasons: Set[String], combinable: Boolean): Seq[DeltaRules.Step] = {
    val sessions = windows.exists(_.spec.kind.name == "SESSION")
    def how(p: LogicalPlan, below: Boolean, generic: Either[String, String]): String = p match {
      case _: LogicalRelation => "its change feed, signed: the windows its changed rows fall in"
      case w: WindowTableFunction if w.spec.kind.name == "SESSION" => "the sessions a change can reach, recomputed from their rows"
      case _: WindowTableFunction => "each changed row's windows, touched"
      case _: Project | _: SubqueryAlias | _: View => "rows pass through"
      case _ if below => generic.left.getOrElse("rows pass through")
      case _: Aggregate if sessions => "the reached sessions' groups, recomputed from their rows"
      case _: Aggregate if combinable => "the touched windows' groups: the change's aggregates combined into theirs, or recomputed"
      case _: Aggregate => "the touched windows' groups, recomputed from their rows"
      case _: Join => "window by window: the touched windows of each side, joined"
      case _: Window => "the touched windows' partitions, recomputed"
      case _ => "recomputed over the touched windows' rows"
    }
    def walk(p: LogicalPlan, depth: Int, below: Boolean): Seq[DeltaRules.Step] = {
      val (ruleName, generic) = DeltaRules.rule(p)
      val name = p match {
        case w: WindowTableFunction => s"Window ${w.spec.kind.name}"
        case _ => ruleName
      }
      val own = blockers.collect { case (node, code) if node eq p => code }.distinct
      val verdicts: Seq[Either[String, String]] = if (own.nonEmpty) own.map(Right(_)) else generic match {
        case Right(code) if reasons(code) => Seq(Right(code))
        case _ => Seq(Left(how(p, below, generic)))
      }
      verdicts.map(DeltaRules.step(depth, name, p, _)) ++
        p.children.flatMap(walk(_, depth + 1, below || p.isInstanceOf[WindowTableFunction]))
    }
    val steps = walk(plan, 0, below = false)
    val shown = DeltaRules.reasons(steps).toSet
    steps ++ blockers.map(_._2).distinct.filterNot(shown).map(r => DeltaRules.Step(0, "output", None, Some(r)))
  }

  /**
   * The steps of a GROUP BY (or SELECT DISTINCT) whose groups a change reaches are found from the
   * change itself: the query run over each changed source's rows (DeltaRules' terms, rewritten by
   * DeltaRules.forKeys) outputs a superset of the keys of the groups those rows fall in, whatever
   * the keys are computed from and however many sources are joined below. That holds when every
   * operator below has a rule for finding keys (DeltaRules.steps with `keys`) and no key or join
   * condition reads a nested aggregate's results, which are partial over a change's rows.
   */
  private def groupsByChange(plan: LogicalPlan): Seq[DeltaRules.Step] = {
    val values = DeltaRules.aggregateValues(plan)
    def below(child: LogicalPlan, depth: Int) = DeltaRules.steps(child, keys = true, values)
      .filterNot(_.operator == "output").map(s => s.copy(depth = s.depth + depth + 1))
    def walk(p: LogicalPlan, depth: Int): Seq[DeltaRules.Step] = p match {
      case a: Aggregate if a.groupingExpressions.exists(DeltaRules.readsValues(_, values)) =>
        DeltaRules.step(depth, "Aggregate", a, Right("GROUP_BY_AGGREGATE_VALUE")) +: below(a.child, depth)
      case a: Aggregate =>
        DeltaRules.Step(depth, "Aggregate", Some("the groups the change reaches, combined or recomputed"), None) +:
          below(a.child, depth)
      case d: Distinct =>
        DeltaRules.Step(depth, "Distinct", Some("the rows the change reaches, recomputed"), None) +: below(d.child, depth)
      case f: Filter =>
        DeltaRules.Step(depth, "Filter (HAVING)", Some("applied when the groups are recomputed"), None) +: walk(f.child, depth + 1)
      case _: Project | _: Sort | _: SubqueryAlias =>
        DeltaRules.Step(depth, p.nodeName, Some("rows pass through"), None) +: walk(p.children.head, depth + 1)
      case _ => Nil
    }
    val steps = walk(plan, 0)
    if (steps.exists(s => s.operator == "Aggregate" || s.operator == "Distinct")) steps else Nil
  }

  /**
   * The OVER (...) functions at the top of `plan` (under projections, filters, ORDER BY, aliases):
   * Spark's Window operators, one per distinct partitioning and ordering, stacked.
   */
  private def topWindows(plan: LogicalPlan): Seq[Window] = plan match {
    case w: Window => w +: topWindows(w.child)
    case p @ (_: Project | _: Filter | _: Sort | _: SubqueryAlias) => topWindows(p.children.head)
    case _ => Nil
  }

  /**
   * The output columns that carry the partition keys every top OVER (...) shares (top-N,
   * deduplication: `ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC)`): a change
   * reaches the partitions of its rows, and recomputing a coarser partition recomputes the finer
   * ones in it. None without a top OVER, or when no shared key is an output column as itself.
   */
  private def partitionBy(plan: LogicalPlan): Option[Seq[String]] = {
    val windows = topWindows(plan)
    val shared = windows.map(_.partitionSpec.collect { case a: Attribute => a.exprId }.toSet)
      .reduceOption(_ & _).getOrElse(Set.empty)
    val byName = outputNames(plan)
    val keys = windows.headOption.toSeq.flatMap(_.partitionSpec).collect {
      case a: Attribute if shared.contains(a.exprId) && byName.contains(a.exprId) => byName(a.exprId)
    }.distinct
    if (windows.nonEmpty && keys.nonEmpty) Some(keys) else None
  }

  /**
   * The steps of a view whose top is OVER (PARTITION BY ...): filters and projections above it are
   * applied when the partitions are recomputed; below it, the rules for finding keys (a superset
   * of the rows a change reaches), as below a GROUP BY. A key that is an aggregate's result is
   * partial over the change (GROUP_BY_AGGREGATE_VALUE).
   */
  private def partitionsByChange(plan: LogicalPlan): Seq[DeltaRules.Step] = {
    val values = DeltaRules.aggregateValues(plan)
    def walk(p: LogicalPlan, depth: Int): Seq[DeltaRules.Step] = p match {
      case w: Window if w.partitionSpec.exists(DeltaRules.readsValues(_, values)) =>
        Seq(DeltaRules.step(depth, "Window (OVER)", w, Right("GROUP_BY_AGGREGATE_VALUE")))
      case w: Window =>
        DeltaRules.Step(depth, "Window (OVER)", Some("the partitions the change reaches, recomputed"), None) +:
          walk(w.child, depth + 1)
      case f: Filter if topWindows(f.child).nonEmpty =>
        DeltaRules.Step(depth, "Filter", Some("applied when the partitions are recomputed"), None) +: walk(f.child, depth + 1)
      case _: Project | _: Sort | _: SubqueryAlias if topWindows(p).nonEmpty =>
        DeltaRules.Step(depth, p.nodeName, Some("rows pass through"), None) +: walk(p.children.head, depth + 1)
      case _ => DeltaRules.steps(p, keys = true, values).filterNot(_.operator == "output")
        .map(s => s.copy(depth = s.depth + depth))
    }
    walk(plan, 0)
  }

  /** A SELECT DISTINCT (under ORDER BY or an alias): its rows are its groups, keyed by every column. */
  private def topDistinct(plan: LogicalPlan): Option[Distinct] = plan match {
    case d: Distinct => Some(d)
    case p @ (_: Sort | _: SubqueryAlias) => topDistinct(p.children.head)
    case _ => None
  }

  /**
   * Whether the touched groups can be read off the change feed's rows: one source, row by row
   * below the aggregate, and each key that source's own column under its own name. Otherwise
   * (`SELECT price AS auction ... GROUP BY price`, a join, a nested aggregate) they come from the
   * query over the change (`keys_by_change`).
   */
  private def keysFromSource(plan: LogicalPlan): Boolean = topAggregate(plan).exists { agg =>
    val leaves = agg.child.collectLeaves()  // one: no join
    rowByRow(agg) && leaves.size == 1 && groupBy(plan).exists(names => names.zip(agg.groupingExpressions).forall {
        case (name, a: Attribute) => leaves.head.output.exists(s => s.exprId == a.exprId && s.name.equalsIgnoreCase(name))
        case _ => false
    })
  }

  /**
   * Whether every row the aggregate groups is one row of a relation, kept or not and projected:
   * only projections, filters and inner joins below it. Nothing that sees other rows (an OVER,
   * another aggregate) or keeps rows for missing ones (outer, semi and anti joins).
   */
  private def rowByRow(agg: Aggregate): Boolean = !agg.child.exists {
    case _: Project | _: Filter | _: SubqueryAlias | _: LogicalRelation => false
    case j: Join => j.joinType != Inner
    case _ => true
  }

  /**
   * Whether each row of the read `leaf` reaches the top aggregate on its own, so that the query
   * run over a change of it (mv_substitute_change: UNION branches not reading it emptied) gives
   * exactly the aggregate's input rows that change adds or takes away, and its aggregates add to
   * the view's (mv/combine.py): on the way up only projections, filters, UNION branches, per-row
   * windows (TUMBLE, HOP, CUMULATE), inner joins and the kept side of an outer, semi or anti join.
   * Not below another aggregate or an OVER (a row's result depends on other rows), nor on a join's
   * padded side (a change there flips the other side's rows).
   * {{{
   *   bids JOIN auctions GROUP BY category: bids and auctions linear
   *   auctions LEFT JOIN bids GROUP BY auction: auctions linear, bids not
   * }}}
   */
  private def linearAt(plan: LogicalPlan, leaf: LogicalPlan): Boolean = topAggregate(plan).exists { agg =>
    def reaches(p: LogicalPlan): Boolean = (p eq leaf) || {
      val below = p.children.filter(_.exists(_ eq leaf))
      below.size == 1 && reaches(below.head) && (p match {
        case _: Project | _: Filter | _: SubqueryAlias | _: View | _: Union => true
        case w: WindowTableFunction => w.spec.kind.isPerRow
        case j: Join => j.joinType match {
          case Inner | Cross => true
          case LeftOuter | LeftSemi | LeftAnti => below.head eq j.left
          case RightOuter => below.head eq j.right
          case _ => false
        }
        case _ => false
      })
    }
    reaches(agg.child)
  }

  private def topAggregate(plan: LogicalPlan): Option[Aggregate] = plan match {
    case a: Aggregate => Some(a)
    case p @ (_: Project | _: Filter | _: Sort | _: SubqueryAlias) => topAggregate(p.children.head)
    case _ => None
  }

  /**
   * For the output columns of a query that is its top aggregate under renaming projections only
   * (no HAVING, no expressions over aggregates): how each column combines across row sets.
   * `key` (a grouping column), `count_star`, `count`, `sum_exact` (integral or decimal),
   * `sum_float`, `min`, `max`. Empty when some column is none of these, so a group's new row can
   * only be recomputed, not combined from its old row and the changes' own aggregates.
   */
  private def aggregateKinds(plan: LogicalPlan): Map[ExprId, String] = {
    import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, Complete, Count, Max, Min, Sum}
    import org.apache.spark.sql.types.{ByteType, DecimalType, IntegerType, LongType, ShortType}
    def underRenames(p: LogicalPlan, rename: Map[ExprId, ExprId]): Option[(Aggregate, Map[ExprId, ExprId])] = p match {
      case a: Aggregate => Some((a, rename))
      case s: SubqueryAlias => underRenames(s.child, rename)
      case Project(list, child) if list.forall(e => e.isInstanceOf[Attribute] || e.isInstanceOf[Alias] &&
          e.asInstanceOf[Alias].child.isInstanceOf[Attribute]) =>
        val inner = list.map {
          case a: Attribute => a.exprId -> a.exprId
          case al: Alias => al.exprId -> al.child.asInstanceOf[Attribute].exprId
        }.toMap
        underRenames(child, rename.map { case (out, mid) => out -> inner.getOrElse(mid, mid) })
      case _ => None
    }
    underRenames(plan, plan.output.map(a => a.exprId -> a.exprId).toMap).map { case (agg, rename) =>
      val keys = agg.groupingExpressions.collect { case a: Attribute => a.exprId }.toSet
      val kinds: Map[ExprId, String] = agg.aggregateExpressions.flatMap {
        case a: Attribute if keys.contains(a.exprId) => Some(a.exprId -> "key")
        case al @ Alias(a: Attribute, _) if keys.contains(a.exprId) => Some(al.exprId -> "key")
        case al @ Alias(AggregateExpression(fn, Complete, false, None, _), _) => (fn match {
          case Count(Seq(l: Literal)) if l.value != null => Some("count_star")
          case _: Count => Some("count")
          case s: Sum => Some(s.dataType match {
            case ByteType | ShortType | IntegerType | LongType | _: DecimalType => "sum_exact"
            case _ => "sum_float"
          })
          case _: Min => Some("min")
          case _: Max => Some("max")
          case _ => None
        }).map(al.exprId -> _)
        case _ => None
      }.toMap
      rename.flatMap { case (out, inner) => kinds.get(inner).map(out -> _) }
    }.getOrElse(Map.empty)
  }

  /** Output column names of the top aggregate's grouping keys, if every key is in the output. */
  private def groupBy(plan: LogicalPlan): Option[Seq[String]] =
    topDistinct(plan).map(_ => plan.output.map(_.name)).orElse(topAggregate(plan).flatMap { agg =>
    val names = outputNames(plan)
    val keys = agg.groupingExpressions.map {
      case a: Attribute => names.get(a.exprId)
      // GROUP BY price % 3 with SELECT price % 3 AS b: without windows only, whose paths read keys
      // off the change feed's rows (with windows it stays no key, as before).
      case computed if !plan.exists(_.isInstanceOf[WindowTableFunction]) => agg.aggregateExpressions.collectFirst {
        case alias: Alias if alias.child.semanticEquals(computed) && names.contains(alias.exprId) => names(alias.exprId)
      }
      case _ => None
    }
    if (keys.forall(_.isDefined)) Some(keys.flatten) else None
  })

  /**
   * Each attribute that an output column of `plan` is, or that one renames (`SELECT auction AS id`
   * names `auction` id), with that column's name.
   */
  private def outputNames(plan: LogicalPlan): Map[ExprId, String] = {
    val names = mutable.Map[ExprId, String]()
    plan.output.foreach(a => names(a.exprId) = a.name)
    plan.foreach(_.expressions.foreach {
      case alias @ Alias(a: Attribute, _) if names.contains(alias.exprId) => names(a.exprId) = names(alias.exprId)
      case _ =>
    })
    names.toMap
  }

  private def tableName(leaf: LogicalPlan): Option[String] = leaf match {
    case r: LogicalRelation => r.catalogTable.map(_.identifier.quotedString)
    case h: HiveTableRelation => Some(h.tableMeta.identifier.quotedString)
    case _ => None
  }

  private def sources(plan: LogicalPlan, reasons: mutable.Set[String], rows: Boolean): Seq[Map[String, Any]] = {
    val leaves = plan.collectLeaves().distinct
    lazy val used = usedColumns(plan)
    lazy val equated = equatedColumns(plan)
    lazy val times = timeKeys(plan)
    // each read's regroupWindow, by its index: the field below, its partners and the bands use it
    lazy val windows = leaves.indices.flatMap { i =>
      leaves(i) match {
        case r: LogicalRelation => regroupWindow(plan, r).map(i -> _)
        case _ => None
      }
    }.toMap
    lazy val bands = windowBands(plan, leaves, windows)
    lazy val partners = windowPartners(plan, leaves, windows, bands)
    leaves.flatMap {
      case r: LogicalRelation =>
        val isDelta = r.relation.toString.contains("Delta") ||
          r.catalogTable.flatMap(_.provider).exists(_.equalsIgnoreCase("delta"))
        Some(Map("table" -> r.catalogTable.map(_.identifier.quotedString).orNull,
          "provider" -> (if (isDelta) "delta" else r.catalogTable.flatMap(_.provider).getOrElse("files")),
          "materialized_view" -> (isDelta && r.catalogTable.exists(isMaterializedView)),
          "columns" -> r.output.map(_.name),  // every column: a change feed carries them all
          "used" -> used.map(u => r.output.filter(u.contains).map(_.name)).orNull,
          "equated" -> r.output.filter(equated.contains).map(_.name),
          "time_keys" -> r.output.flatMap(a => times.getOrElse(a.exprId, Nil)),
          // its rows reach the top aggregate each on its own: its change's aggregates combine (mv/combine.py)
          "linear" -> (r.catalogTable.isDefined && linearAt(plan, r)),
          // a join's matches that this source's change flips (DeltaRules.flips): rows views add those terms
          "flips" -> (r.catalogTable.isDefined && DeltaRules.flippedAt(plan, r) > 0),
          // read under an aggregate of a query of rows (DeltaRules.regroups): its terms recompute its groups
          "regroups" -> (rows && r.catalogTable.isDefined && DeltaRules.regroupedAt(plan, r)),
          // its change's term can carry the sign of each row to the output (DeltaRules.signed): one term, not two
          "signed" -> (rows && r.catalogTable.isDefined && DeltaRules.carriesSign(plan, r)),
          "regroup_window" -> (if (!rows || r.catalogTable.isEmpty) null else windows.get(leaves.indexOf(r)).orElse(
            bands.get(leaves.indexOf(r)).map(b => Map("time_column" -> b.timeColumn, "size" -> b.reach))).orNull),
          "window_partners" -> (if (rows && r.catalogTable.isDefined) partners.getOrElse(leaves.indexOf(r), Nil) else Nil)))
      case h: HiveTableRelation =>
        Some(Map("table" -> h.tableMeta.identifier.quotedString, "provider" -> "hive",
          "columns" -> h.output.map(_.name)))
      case _: LocalRelation | _: OneRowRelation | _: Range => None
      case other =>
        reasons += "UNSUPPORTED_SOURCE"
        Some(Map("table" -> null, "provider" -> other.nodeName))
    }
  }

  /**
   * The attributes of its relations that an equality of two columns in a join's or a filter's
   * condition names (`a.id = b.auction`; `FROM a, b WHERE ...` too), through renames: kept to the
   * bounds of its change's values there, a term's change lets Spark infer the same bounds for the
   * column it equals (InferFiltersFromConstraints), whose files outside them Delta skips
   * (mv/row_refresh.py).
   */
  private def equatedColumns(plan: LogicalPlan): AttributeSet = {
    val renamed: Map[ExprId, Attribute] = plan.collect {
      case p: Project => p.projectList.collect { case a @ Alias(c: Attribute, _) => a.exprId -> c }
    }.flatten.toMap
    def origin(a: Attribute): Attribute = renamed.get(a.exprId).map(origin).getOrElse(a)
    AttributeSet(plan.collect {
      case Join(_, _, _, Some(condition), _) => condition
      case Filter(condition, _) => condition
    }.flatMap(splitConjunctivePredicates).flatMap {
      case EqualTo(a: Attribute, b: Attribute) => Seq(origin(a), origin(b))
      case _ => Nil
    })
  }

  /**
   * The top GROUP BY's keys that are a function keeping the order of one timestamp column of a
   * relation (`DATE_FORMAT(dateTime, 'yyyy-MM-dd')`, `date_trunc('HOUR', ts)`; in GROUP BY or a
   * subquery's SELECT), by that column: a key's rows lie within the time it spans, so its
   * recomputation reads only the source's files of that time (mv/time_keys.py, which decides which
   * formats keep the order). Not `CAST(ts AS DATE)`: Spark turns a range of those into one of ts
   * itself (UnwrapCastInBinaryComparison).
   * Example: GROUP BY DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS day gives dateTime ->
   * {"key": "day", "column": "dateTime", "function": "date_format", "argument": "yyyy-MM-dd"}.
   */
  private def timeKeys(plan: LogicalPlan): Map[ExprId, Seq[Map[String, Any]]] = {
    val aliases: Map[ExprId, Expression] = plan.collect {
      case p: Project => p.projectList.collect { case a: Alias => a.exprId -> a.child }
    }.flatten.toMap
    def defined(e: Expression): Expression = e match {
      case a: Attribute if aliases.contains(a.exprId) => defined(aliases(a.exprId))
      case other => other
    }
    def column(e: Expression): Option[Attribute] = defined(e) match {
      case a: Attribute if a.dataType == TimestampType => Some(a)  // not TIMESTAMP_NTZ: its keys are local times
      case _ => None
    }
    def text(e: Expression): Option[String] = e match {
      case Literal(v, StringType) if v != null => Some(v.toString)
      case _ => None
    }
    val found = for {  // kept to a time, a read gives the aggregate exactly its rows of that time
      agg <- topAggregate(plan).filter(rowByRow).toSeq
      names <- groupBy(plan).toSeq
      (name, key) <- names.zip(agg.groupingExpressions)
      (a, function, argument) <- (defined(key) match {
        case d: DateFormatClass => for (a <- column(d.left); f <- text(d.right)) yield (a, "date_format", f)
        case t: TruncTimestamp => for (a <- column(t.timestamp); u <- text(t.format)) yield (a, "date_trunc", u)
        case _ => None
      }).toSeq
    } yield a.exprId -> Map("key" -> name, "column" -> a.name, "function" -> function, "argument" -> argument)
    found.groupBy(_._1).map { case (id, keys) => id -> keys.map(_._2) }
  }

  /**
   * The attributes of its relations that the query's operators read anywhere (subqueries
   * included), or its output: a change to another column of a source is none of the query's.
   * None when the query is not deterministic (`input_file_name()` tells a row rewritten by an
   * update from its old copy, though its columns are the same). A DISTINCT or a set operation
   * compares whole rows of its inputs without naming their columns: all of them count as read
   * (`TABLE a INTERSECT TABLE b`). The maintainer reads only these columns of a change
   * (mv/change_feed.py) and nets away updates of the others.
   */
  private def usedColumns(plan: LogicalPlan): Option[AttributeSet] =
    if (!plan.deterministic) None
    else Some(AttributeSet(plan.collectWithSubqueries {
      case d: Distinct => d.child.output
      case s @ (_: SetOperation | _: Union) => s.children.flatMap(_.output)
      case p if !p.isInstanceOf[LeafNode] => p.expressions.flatMap(_.references)  // a relation's are its output
    }.flatten) ++ plan.outputSet)

  /**
   * For each read of `leaves` (by index) regrouped by windows of its own time column
   * (`regroupWindow`), the other such reads an inner join below every aggregate over either joins
   * it to on their windows' bounds (an equality of their window_start, or window_end, columns). A
   * regroup term of one joins the other's windows of the groups it touches alone, each within
   * those groups' windows' time give or take a window: it reads the other only around the change's
   * times too (mv/row_refresh.py). Nexmark q5: each auction's bids per window joined to each
   * window's most bids. A read of rows held to another's windows by a join (`bands`) is that
   * read's partner too.
   */
  private def windowPartners(plan: LogicalPlan, leaves: Seq[LogicalPlan], windows: Map[Int, Map[String, Any]],
                             bands: Map[Int, WindowBands.Band]): Map[Int, Seq[Int]] = {
    val windowed = windows.keys.toSeq.sorted
    def below(j: Join, leaf: LogicalPlan): Boolean =
      DeltaRules.regroupingsOf(plan, leaf).forall(a => j.children.exists(_.exists(_ eq a)))
    val pairs = plan.collect {
      case j @ Join(left, right, org.apache.spark.sql.catalyst.plans.Inner, Some(condition), _) =>
        val equal = splitConjunctivePredicates(condition).collect {
          case EqualTo(a: Attribute, b: Attribute) => (a.exprId, b.exprId)
          case EqualNullSafe(a: Attribute, b: Attribute) => (a.exprId, b.exprId)
        }
        for {
          x <- windowed if left.exists(_ == leaves(x)) && below(j, leaves(x))
          y <- windowed if right.exists(_ == leaves(y)) && below(j, leaves(y))
          (bx, by) = (windowBounds(left, leaves(x)), windowBounds(right, leaves(y)))
          if equal.exists { case (a, b) => bx.get(a).exists(by.get(b).contains) || bx.get(b).exists(by.get(a).contains) }
          pair <- Seq(x -> y, y -> x)
        } yield pair
    }.flatten ++ bands.toSeq.flatMap { case (i, band) => Seq(i -> band.partner, band.partner -> i) }
    pairs.groupBy(_._1).map { case (k, v) => k -> v.map(_._2).distinct }
  }

  /** The bounds of the windows over `leaf` found within `within` (traced through aliases), each
   *  as "start" or "end". */
  private def windowBounds(within: LogicalPlan, leaf: LogicalPlan): Map[ExprId, String] = traced(within, within.collect {
    case w: WindowTableFunction if w.child.exists(_ == leaf) =>
      Seq(w.windowStart.exprId -> "start", w.windowEnd.exprId -> "end")
  }.flatten.toMap)

  /** The reads of rows of `leaves` (by index) held to a windowed read's windows (`windows`: by
   *  index, as regroupWindow gives them) by a join (WindowBands): Nexmark q7's bids between a
   *  window's end less its size and its end. */
  private def windowBands(plan: LogicalPlan, leaves: Seq[LogicalPlan],
                          windows: Map[Int, Map[String, Any]]): Map[Int, WindowBands.Band] = {
    val windowed = windows.toSeq.sortBy(_._1).map { case (i, w) =>
      (i, leaves(i), windowBounds(plan, leaves(i)).keySet, w("size").asInstanceOf[Long])
    }
    val timestamps = Set[DataType](TimestampType, TimestampNTZType)
    leaves.indices.filterNot(windows.contains).flatMap { i =>
      leaves(i) match {
        case r: LogicalRelation if r.catalogTable.isDefined && DeltaRules.regroupingsOf(plan, r).isEmpty =>
          val times = traced(plan, r.output.collect { case a if timestamps(a.dataType) => a.exprId -> a.name }.toMap)
          WindowBands.of(plan, r, times, windowed).map(i -> _)
        case _ => None
      }
    }.toMap
  }

  /** The temporary views the query reads (by name): they live in one session, and a view's refresh
   * runs in a session of its own. Global temporary views are the application's: refreshes see them. */
  private def temporaryViews(plan: LogicalPlan): Seq[String] = {
    val global = SparkSession.active.conf.get("spark.sql.globalTempDatabase", "global_temp")
    plan.collectWithSubqueries {
      case v: View if v.isTempView && !v.desc.identifier.database.exists(_.equalsIgnoreCase(global)) =>
        v.desc.identifier.unquotedString
    }.distinct
  }

  /** Whether the Delta table is a materialized view: its definition is one of its Delta properties. */
  private def isMaterializedView(table: org.apache.spark.sql.catalyst.catalog.CatalogTable): Boolean =
    scala.util.Try(org.apache.spark.sql.delta.DeltaLog.forTable(SparkSession.active, table)
      .update(catalogTableOpt = Some(table)).metadata.configuration.contains("mv.definition")).getOrElse(false)

  private def toJava(value: Any): Any = value match {
    case m: Map[_, _] => m.map { case (k, v) => k -> toJava(v) }.asJava
    case s: Seq[_] => s.map(toJava).asJava
    case other => other
  }
}
