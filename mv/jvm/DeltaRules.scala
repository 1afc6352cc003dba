package io.mvengine

import scala.collection.mutable

import org.apache.spark.sql.catalyst.analysis.MultiInstanceRelation
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeMap, EqualNullSafe, ExprId, Expression, Literal,
  NamedExpression, SubqueryExpression}
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression
import org.apache.spark.sql.catalyst.plans.{Cross, FullOuter, Inner, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical._
import org.apache.spark.sql.execution.datasources.LogicalRelation
import org.apache.spark.sql.types.{ArrayType, DataType, MapType, StructType}

/**
 * The maintenance planner's rules for queries of rows (no window function, no GROUP BY): how each
 * operator turns a signed change of its input into a signed change of its output (DBSP's and
 * Enzyme's delta rules). The rules are listed once, here, in `rule`. Every rule below but one is
 * linear in each source the query reads, so the change of the whole query is the sum over its
 * changed sources S of the query run over S's change, with the sources before S read at their new
 * version and those after it at their old one (a join: dL JOIN R(new) + L(old) JOIN dR). The
 * exception: an outer join's padded side, a semi or anti join's right side (`flipsBy`), whose
 * change flips rows of the other side; such a term adds those rows at S's new version and
 * subtracts them at its old one (`linear`, `flips`). Another: an aggregate (or DISTINCT) below the
 * rows, whose change is its groups the change reaches, recomputed at S's new version (+) and at
 * its old one (-), found below it by the rules that find keys (`regroups`). The Python side
 * (mv/row_refresh.py) runs exactly that. An operator without a rule gives a reason code instead,
 * and the view refreshes in full.
 * {{{
 *   DeltaRules.steps(analysedPlan)
 *   // Step(0, "Project", Some("rows pass through"), None), Step(1, "Join Inner", Some("dL JOIN R(new) + ..."), None)
 * }}}
 */
object DeltaRules {

  /** One operator of the plan, `depth` below the top: its rule, or why it has none. */
  case class Step(depth: Int, operator: String, rule: Option[String], reason: Option[String],
      fragment: Option[String] = None) {
    def toMap: Map[String, Any] = Map("depth" -> depth, "operator" -> operator, "rule" -> rule.orNull,
      "reason" -> reason.orNull, "fragment" -> fragment.orNull)
  }

  /** The step of operator `p` (named `name`) `depth` below the top: its rule (Left), or the reason
   *  it has none (Right), which points at `p`'s fragment of the query's text. */
  def step(depth: Int, name: String, p: LogicalPlan, verdict: Either[String, String]): Step =
    Step(depth, name, verdict.left.toOption, verdict.toOption, verdict.toOption.flatMap(fragment(p, _)))

  // A fragment of the query's text longer than this is cut, with "..." after it.
  private val FragmentLength = 120

  /**
   * The text of the query operator `p` was made from, for the reason `code` (Catalyst keeps each
   * node's and expression's origin in the text it parsed): the expressions at fault for
   * NONDETERMINISTIC, READS_CURRENT_TIME and SUBQUERY; else the operator's own expressions (a
   * filter's or a join's condition, OVER's functions, GROUP BY's keys, a generator); else the
   * operator. None when its origin is not known, or when it is the whole query (no help).
   * {{{
   *   fragment(filter, "NONDETERMINISTIC")  ==  Some("rand()")
   * }}}
   */
  def fragment(p: LogicalPlan, code: String): Option[String] = {
    def where(test: Expression => Boolean) = p.expressions.flatMap(_.collect { case e if test(e) => e })
    val culprits = code match {
      case "NONDETERMINISTIC" => where(e => !e.deterministic && e.children.forall(_.deterministic))
      case "READS_CURRENT_TIME" => where(e => ClockReads(e.getClass.getSimpleName))
      case "SUBQUERY" => where(_.isInstanceOf[SubqueryExpression])
      case _ => Nil
    }
    val own = p match {
      case f: Filter => Seq(f.condition)
      case j: Join => j.condition.toSeq
      case w: Window => w.windowExpressions
      case a: Aggregate => a.groupingExpressions
      case g: Generate => Seq(g.generator)
      case _ => Nil
    }
    val origins = if (culprits.nonEmpty) culprits.map(_.origin) else if (own.nonEmpty) own.map(_.origin) else Seq(p.origin)
    val spans = origins.flatMap(o => for (s <- o.startIndex; e <- o.stopIndex; t <- o.sqlText) yield (s, e, t))
    spans.headOption.map(_._3).flatMap { text =>
      val same = spans.filter(_._3 == text)
      val (start, stop) = (same.map(_._1).min, same.map(_._2).max)
      if (start <= 0 && stop >= text.length - 1) None
      else {
        val found = text.substring(start, math.min(stop + 1, text.length)).trim.replaceAll("\\s+", " ")
        Some(if (found.length > FragmentLength) found.take(FragmentLength) + "..." else found)
      }
    }
  }

  private val passes = "rows pass through"

  private val regrouped = "its groups the change reaches, recomputed at the new version (+) and the old (-)"

  /**
   * Each operator of `plan`, top first, with its rule or the reason it has none. With `keys`, the
   * rules that find which rows (or groups) a change reaches rather than the change itself (`reach`):
   * the plan below a GROUP BY whose touched groups are recomputed, run by `mv_substitute_keys`.
   * Without, those rules still apply below an aggregate of rows (`regroups`: its touched groups).
   */
  def steps(plan: LogicalPlan, keys: Boolean = false, values: Set[ExprId] = Set.empty): Seq[Step] = {
    val found = if (keys) values else aggregateValues(plan)
    def walk(p: LogicalPlan, depth: Int, finding: Boolean): Seq[Step] = {
      val (name, verdict) = if (finding) keyed(p, found)
        else if (regrouping(p)) { val (n, v) = keyed(p, found); (n, v.left.map(_ => regrouped)) }
        else rule(p)
      step(depth, name, p, verdict) +: p.children.flatMap(walk(_, depth + 1, finding || regrouping(p)))
    }
    walk(plan, 0, keys) ++ (outputReasons(plan) ++ (if (keys) Nil else planReasons(plan))).map(r =>
      Step(0, "output", None, Some(r)))
  }

  /** Whether `p` regroups its input: below rows, its change is recomputed group by group (`regroups`). */
  private def regrouping(p: LogicalPlan): Boolean = p.isInstanceOf[Aggregate] || p.isInstanceOf[Distinct]

  /** The topmost aggregates (and DISTINCTs) of `plan`: those the rules of rows reach (`regroups`). */
  private def regroupings(plan: LogicalPlan): Seq[LogicalPlan] =
    if (regrouping(plan)) Seq(plan) else plan.children.flatMap(regroupings)

  /** The operators of `plan` above its topmost aggregates: those the rules of rows apply to. */
  private def aboveRegroupings(plan: LogicalPlan): Seq[LogicalPlan] =
    if (regrouping(plan)) Nil else plan +: plan.children.flatMap(aboveRegroupings)

  /** The topmost aggregates of a query of rows that read the relation `leaf`. */
  def regroupingsOf(plan: LogicalPlan, leaf: LogicalPlan): Seq[LogicalPlan] = regroupings(plan).filter(_.exists(_ == leaf))

  /** Whether a query of rows reads the relation `leaf` under an aggregate (`regroups`): its terms recompute groups. */
  def regroupedAt(plan: LogicalPlan, leaf: LogicalPlan): Boolean = regroupings(plan).exists(_.exists(_ == leaf))

  /** The reason codes of `steps`, each once. */
  def reasons(steps: Seq[Step]): Seq[String] = steps.flatMap(_.reason).distinct

  // What reads the clock: Spark takes each as a constant of the query's run (deterministic, to it), so
  // a view over one equals its query only as of its last recomputation, whatever changed since: a
  // `WHERE ts > current_timestamp() - INTERVAL 1 HOUR` drops rows as time passes, not as sources change.
  // By name: current_time() (CurrentTime) is Spark 4.1's.
  private val ClockReads =
    Set("CurrentTimestamp", "Now", "CurrentDate", "LocalTimestamp", "CurrentTime", "CurrentBatchTimestamp")

  /** Whether `e` reads the clock (current_timestamp(), now(), current_date(), unix_timestamp(), ...). */
  def readsClock(e: Expression): Boolean = e.exists(x => ClockReads(x.getClass.getSimpleName))

  /** An operator's name and its rule (Left) or the reason it has none (Right). */
  def rule(p: LogicalPlan): (String, Either[String, String]) = p match {
    case _ if p.expressions.exists(_.exists(_.isInstanceOf[SubqueryExpression])) => (p.nodeName, Right("SUBQUERY"))
    case _ if !p.expressions.forall(_.deterministic) => (p.nodeName, Right("NONDETERMINISTIC"))
    case _ if p.expressions.exists(readsClock) => (p.nodeName, Right("READS_CURRENT_TIME"))
    case _: Project | _: Filter | _: SubqueryAlias | _: View => (p.nodeName, Left(passes))
    case g: Generate => (s"Generate ${g.generator.prettyName}", Left("each row's generated rows pass through"))
    case s: Sort if s.global => ("Sort", Left("a table keeps no order: rows pass through"))
    case _: Union => ("Union", Left("each branch's change, added"))
    case j: Join => join(j)
    case r: LogicalRelation => (s"Source ${r.catalogTable.map(_.identifier.quotedString).getOrElse("files")}",
      Left("its change feed, signed"))
    case _: LocalRelation | _: OneRowRelation | _: Range => (p.nodeName, Left("constant: no change"))
    case _: Aggregate | _: Distinct => (p.nodeName, Left(regrouped))
    case _: Deduplicate => (p.nodeName, Right("DISTINCT"))
    case _: Window => ("Window (OVER)", Right("OVER_WITHOUT_RULE"))
    case w: WindowTableFunction if w.spec.kind.isPerRow =>
      (s"Window ${w.spec.kind.name}", Left("each row's windows"))
    case _: Intersect | _: Except => (p.nodeName, Right("SET_OPERATION"))
    case _: GlobalLimit | _: LocalLimit => (p.nodeName, Right("LIMIT"))
    case _: WindowTableFunction => (p.nodeName, Right("WINDOW_COLUMNS_NOT_IN_OUTPUT"))
    case _ => (p.nodeName, Right("OPERATOR_WITHOUT_RULE"))
  }

  /**
   * The rules that carry a superset of the rows a change reaches (not their signed change): enough
   * to name the groups above them that must be recomputed. An aggregate or DISTINCT over the
   * changed rows gives the groups they fall in; a filter over an aggregate (HAVING) is dropped, as
   * it would filter the change's partial groups; an outer join gives the changed rows joined and,
   * matched or padded with NULLs, the other side's rows they match (`forKeys` rewrites it so).
   */
  private def reach(p: LogicalPlan): Option[(String, String)] = p match {
    case _ if p.expressions.exists(_.exists(_.isInstanceOf[SubqueryExpression])) => None
    case _ if !p.expressions.forall(_.deterministic) => None
    case _: Aggregate => Some(("Aggregate", "the groups of the changed rows"))
    case w: WindowTableFunction if w.spec.kind.isPerRow =>
      Some((s"Window ${w.spec.kind.name}", "each changed row's windows"))
    case _: Distinct | _: Deduplicate => Some((p.nodeName, "the changed rows, once each"))
    case f: Filter if aboveAggregate(f) => Some(("Filter (HAVING)", "dropped to find the groups; kept when they are recomputed"))
    case j: Join if Seq(LeftOuter, RightOuter, FullOuter, LeftSemi, LeftAnti).contains(j.joinType) && !selfJoin(j) =>
      Some((s"Join ${j.joinType.sql}", "the changed rows joined, and the other side's rows they match, matched or padded"))
    case _ => None
  }

  /**
   * An operator's rule for finding keys (`reach`, else `rule`), unless it decides a key or a join
   * by `values`: aggregate results, which over a change's rows are partial (a deleted top bid's
   * auction has a new maximum the change does not hold), so the groups found could miss one.
   * An inner self-join finds keys as any inner join: each read's term gives the groups its
   * change reaches (the reads before it at the new version, those after at the old).
   */
  private def keyed(p: LogicalPlan, values: Set[ExprId]): (String, Either[String, String]) = {
    val (name, verdict) = reach(p).map(r => (r._1, Left(r._2))).getOrElse(rule(p))
    p match {
      case a: Aggregate if a.groupingExpressions.exists(readsValues(_, values)) => (name, Right("GROUP_BY_AGGREGATE_VALUE"))
      case d: Distinct if d.output.exists(a => values.contains(a.exprId)) => (name, Right("GROUP_BY_AGGREGATE_VALUE"))
      case j: Join if j.condition.exists(readsValues(_, values)) => (name, Right("JOIN_ON_AGGREGATE_VALUE"))
      case _ => (name, verdict)
    }
  }

  def readsValues(e: Expression, values: Set[ExprId]): Boolean = e.references.exists(a => values.contains(a.exprId))

  /** The attributes of `plan` that carry an aggregate's result, or anything computed from one. */
  def aggregateValues(plan: LogicalPlan): Set[ExprId] = {
    val values = mutable.Set[ExprId]()
    def reads(e: Expression) = e.references.exists(a => values.contains(a.exprId))
    plan.foreachUp {
      case a: Aggregate =>
        val byValue = a.groupingExpressions.exists(reads)
        a.aggregateExpressions.foreach { e =>
          if (byValue || reads(e) || e.exists(_.isInstanceOf[AggregateExpression])) values += e.exprId
        }
      case p: Project => p.projectList.foreach(e => if (reads(e)) values += e.exprId)
      case u: Union => u.output.zipWithIndex.foreach { case (a, i) =>
        if (u.children.exists(c => values.contains(c.output(i).exprId))) values += a.exprId
      }
      case g: Generate if reads(g.generator) => values ++= g.generatorOutput.map(_.exprId)
      case w: WindowTableFunction if reads(w.timeColumn) => values ++= w.windowOutput.map(_.exprId)
      case _ =>
    }
    values.toSet
  }

  private def aboveAggregate(f: Filter): Boolean =
    f.child.exists(c => c.isInstanceOf[Aggregate] || c.isInstanceOf[Distinct] || c.isInstanceOf[Window])

  /**
   * `plan`, whose `changed` side reads one changed source's rows, rewritten so that it outputs a
   * superset of the rows that change reaches (the `reach` rules): filters over aggregates or OVER
   * (a top-N's rank) dropped;
   * an outer join whose preserved side is not the changed one joins only the rows the change
   * matches, each output both matched and padded with NULLs (its match may have come or gone);
   * an anti join of a changed right side becomes a semi join (the left rows whose absence changed).
   * {{{
   *   forKeys(plan, reads = p => p reads bids)   // auctions LEFT JOIN bids ~> auctions JOIN bids, padded too
   * }}}
   */
  def forKeys(plan: LogicalPlan, reads: LogicalPlan => Boolean): LogicalPlan = plan.transformUp {
    case f: Filter if aboveAggregate(f) => f.child
    case j: Join if reads(j.left) != reads(j.right) =>
      val changedLeft = reads(j.left)
      (j.joinType, changedLeft) match {
        case (LeftOuter, false) => padded(j, Inner, j.right)
        case (RightOuter, true) => padded(j, Inner, j.left)
        case (FullOuter, true) => padded(j, LeftOuter, j.left)
        case (FullOuter, false) => padded(j, RightOuter, j.right)
        case (LeftAnti, false) => j.copy(joinType = LeftSemi)
        case _ => j
      }
  }

  /** `j` as `joinType`, each row output as it is and with `pad`'s columns NULL, under `j`'s output. */
  private def padded(j: Join, joinType: org.apache.spark.sql.catalyst.plans.JoinType, pad: LogicalPlan): LogicalPlan = {
    val nulls = pad.outputSet
    Expand(Seq(j.output, j.output.map(a => if (nulls.contains(a)) Literal(null, a.dataType) else a)), j.output,
      j.copy(joinType = joinType))
  }

  private def join(j: Join): (String, Either[String, String]) = {
    val name = s"Join ${j.joinType.sql}"
    j.joinType match {
      case Inner | Cross => (name, Left("dL JOIN R(new) + L(old) JOIN dR"))  // a self-join too: a term per read
      case _ if selfJoin(j) => (name, Right("SELF_JOIN"))
      case LeftOuter | RightOuter | FullOuter =>
        (name, Left("dL JOIN R(new) + L(old) JOIN dR, the changed side's own rows padded; the other side's rows " +
          "whose match the change brings or takes, padded with NULLs (+ at the new version, - at the old)"))
      case LeftSemi => (name, Left("dL's rows with a match; L's rows whose match dR brings or takes"))
      case LeftAnti => (name, Left("dL's rows without a match; L's rows whose match dR brings or takes"))
      case _ => (name, Right("SUBQUERY"))  // existence joins come from IN / EXISTS subqueries
    }
  }

  /**
   * Whether `j`'s output is not linear in the rows `reads` marks: they are on the side an outer
   * join pads, or the right side of a semi or anti join, where a row's match coming or going flips
   * a row of the other side (padded, kept, dropped). Such a term is computed in two parts:
   * `linear`, and `flips` at the changed source's new and old versions.
   */
  def flipsBy(j: Join, reads: LogicalPlan => Boolean): Boolean = !selfJoin(j) && (j.joinType match {
    case LeftOuter | LeftSemi | LeftAnti => reads(j.right)
    case RightOuter => reads(j.left)
    case FullOuter => reads(j.left) || reads(j.right)
    case _ => false
  })

  /** How many joins of rows (above its aggregates) in `plan` are not linear in the relation `leaf` (`flipsBy`). */
  def flippedAt(plan: LogicalPlan, leaf: LogicalPlan): Int =
    aboveRegroupings(plan).count { case j: Join => flipsBy(j, _.exists(_ == leaf)); case _ => false }

  /** Whether `relation` is the catalog table whose name's parts, lower case, `table` ends with (`t`, `db.t`, `cat.db.t`). */
  def isTable(relation: LogicalRelation, table: Seq[String]): Boolean =
    relation.catalogTable.exists(_.identifier.nameParts.map(_.toLowerCase).endsWith(table))

  /** The catalog tables `plan` reads, each as its name's parts in lower case. */
  private def tablesRead(plan: LogicalPlan): Set[Seq[String]] = plan.collectLeaves().collect {
    case r: LogicalRelation if r.catalogTable.isDefined => tableParts(r)
  }.toSet

  /** The name's parts, lower case, of the catalog table `r` reads. */
  def tableParts(r: LogicalRelation): Seq[String] = r.catalogTable.get.identifier.nameParts.map(_.toLowerCase)

  /**
   * The linear part of the change through the source `reads` marks: each join `flipsBy` it keeps
   * only the change's own rows, joined (an outer join of the other side becomes inner; a FULL
   * join, outer on the changed side only); a semi or anti join of a changed right side, none.
   * {{{
   *   linear(auctions LEFT JOIN bids, reads bids)   // auctions JOIN bids: the change's bids matched
   * }}}
   */
  def linear(plan: LogicalPlan, reads: LogicalPlan => Boolean): LogicalPlan = plan.transformUp {
    case j: Join if flipsBy(j, reads) => (j.joinType, reads(j.left)) match {
      case (FullOuter, true) => j.copy(joinType = LeftOuter)
      case (FullOuter, false) => j.copy(joinType = RightOuter)
      case (LeftOuter | RightOuter, _) => j.copy(joinType = Inner)
      case _ => LocalRelation(j.output)
    }
  }

  /**
   * `plan` (a linear term, `linear`) with the sign of its change carried to its output as its last
   * column: `base` is the subtree reading the change, `sign` its column of each row's sign (+1, -1).
   * A term over both sides of a change at once, so the sources it joins are read once, not once
   * per side. The operators between pass the column up: projections list it, joins and filters
   * keep it, a UNION's branches end with it (an emptied branch with 0: it has no rows). Any other
   * operator on the way (an aggregate, a semi or anti join whose right side has it, a side an
   * outer join pads) cannot: IllegalArgumentException (`carriesSign` tells beforehand).
   * {{{
   *   signed(Project(auction, price, Join(bids(change), auctions)), bids(change), sign)
   *   // Project(auction, price, sign, Join(...))
   * }}}
   */
  def signed(plan: LogicalPlan, base: LogicalPlan, sign: Attribute): LogicalPlan = {
    val (out, carried) = carry(plan, base, sign)
    val last = carried.getOrElse(throw new IllegalArgumentException("the term does not read the change"))
    Project(out.output.filterNot(_.exprId == last.exprId) :+ last, out)
  }

  /** Whether the term of `leaf`'s change in `plan` can carry its sign (`signed`). */
  def carriesSign(plan: LogicalPlan, leaf: LogicalPlan): Boolean = {
    val sign = Alias(Literal(1), InternalColumns.Sign)()
    val base = Project(leaf.output :+ sign, leaf)
    val term = linear(plan, _.exists(_ eq leaf)).transformUp { case l if l eq leaf => base }
    scala.util.Try(signed(term, base, sign.toAttribute)).isSuccess
  }

  private def carry(plan: LogicalPlan, base: LogicalPlan, sign: Attribute): (LogicalPlan, Option[Attribute]) = {
    if (plan eq base) return (plan, Some(sign))
    val results = plan.children.map(carry(_, base, sign))
    val children = results.map(_._1)
    def cannot = new IllegalArgumentException(s"a change's sign cannot pass ${plan.nodeName}")
    def has(p: LogicalPlan, a: Attribute) = p.output.exists(_.exprId == a.exprId)
    results.flatMap(_._2) match {
      case Seq() => (plan.withNewChildren(children), None)
      case Seq(s) => plan match {
        case p: Project => (p.copy(projectList = p.projectList :+ s, child = children.head), Some(s))
        case u: Union =>
          val aligned = results.map {
            case (c, Some(a)) => Project(c.output.filterNot(_.exprId == a.exprId) :+ a, c)
            case (c, None) => Project(c.output :+ Alias(Literal(0), s.name)(), c)  // an emptied branch
          }
          val out = u.withNewChildren(aligned)
          (out, Some(out.output.last))
        case j: Join =>
          val fromLeft = results.head._2.isDefined
          val padded = j.joinType match {
            case LeftOuter => !fromLeft
            case RightOuter => fromLeft
            case FullOuter => true
            case _ => false
          }
          val out = j.withNewChildren(children)
          if (padded || !has(out, s)) throw cannot
          (out, Some(s))
        case _: Filter | _: SubqueryAlias | _: View | _: Generate | _: Sort =>
          val out = plan.withNewChildren(children)
          if (!has(out, s)) throw cannot
          (out, Some(s))
        case _ => throw cannot
      }
      case _ => throw cannot  // a change on both sides: its signs would multiply
    }
  }

  /**
   * The rows of the other side whose match the change of the source `reads` marks brings or takes,
   * at one version of that source: the one join `flipsBy` it (the planner allows one per source)
   * becomes `K SEMI JOIN M(change) ANTI JOIN M` (SEMI JOIN M for a semi join), K the side kept or
   * padded, M the matched side, M(change) a copy of M whose reads of the source are replaced by
   * the change (their attributes' ids are returned). Padded for an outer join; UNION branches
   * without the join empty. Run at the new version (+) and at the old one (-), the difference is
   * exactly the rows that flipped; rows that did not flip cancel.
   * {{{
   *   flips(auctions LEFT JOIN bids, reads bids)
   *   // auctions SEMI JOIN bids(change) ANTI JOIN bids, with the bids' columns NULL
   * }}}
   */
  def flips(plan: LogicalPlan, reads: LogicalPlan => Boolean): (LogicalPlan, Map[ExprId, ExprId]) = {
    val j = plan.collectFirst { case j: Join if flipsBy(j, reads) => j }.getOrElse(
      throw new IllegalArgumentException("the query has no outer, semi or anti join whose match the change flips"))
    val keptLeft = j.joinType match {
      case RightOuter => false
      case FullOuter => !reads(j.left)
      case _ => true
    }
    val (kept, matched) = if (keptLeft) (j.left, j.right) else (j.right, j.left)
    val (copy, origins) = copied(matched)
    val ids = AttributeMap(matched.output.zip(copy.output))
    val onCopy = j.condition.map(_.transform { case a: Attribute if ids.contains(a) => ids(a) })
    val touched = Join(kept, copy, LeftSemi, onCopy, JoinHint.NONE)
    val flipped = Join(touched, matched, if (j.joinType == LeftSemi) LeftSemi else LeftAnti, j.condition, JoinHint.NONE)
    val out = j.joinType match {
      case LeftSemi | LeftAnti => flipped
      case _ => Project(j.output.map { a =>
        if (kept.outputSet.contains(a)) a else Alias(Literal(null, a.dataType), a.name)(exprId = a.exprId)
      }, flipped)
    }
    val pruned = plan.transformDown {
      case u: Union => u.withNewChildren(u.children.map(c => if (c.exists(_ eq j)) c else LocalRelation(c.output)))
    }
    (pruned.transformUp { case p if p eq j => out }, origins)
  }

  /**
   * A regroup term through the source `reads` marks, at one version of it: each topmost aggregate
   * (or DISTINCT) that reads the source keeps only the groups the change reaches, `A SEMI JOIN
   * keys`, the keys being A's group columns over a copy of A (rewritten by `forKeys`) whose reads of
   * the source are replaced by the change (`copied`: each copied relation's origin). Run at the new
   * version (+) and at the old one (-), untouched groups cancel and touched ones are replaced; the
   * rules above them are linear. Superset keys (a group column left out of A's output) only add
   * groups that cancel.
   * {{{
   *   regroups(persons JOIN (SELECT seller, count(*) FROM auctions GROUP BY seller), reads auctions)
   *   // persons JOIN (... GROUP BY seller) SEMI JOIN (SELECT seller FROM auctions(change) GROUP BY seller)
   * }}}
   */
  def regroups(plan: LogicalPlan, reads: LogicalPlan => Boolean): (LogicalPlan, Map[ExprId, ExprId]) = {
    val origins = mutable.Map[ExprId, ExprId]()
    def restricted(a: LogicalPlan): LogicalPlan = {
      val (copy, copiedFrom) = copied(forKeys(a, reads))
      origins ++= copiedFrom
      val values = aggregateValues(a)
      val on = a.output.zip(copy.output).collect { case (o, c) if !values.contains(o.exprId) => EqualNullSafe(o, c) }
      Join(a, copy, LeftSemi, on.reduceOption[Expression](And), JoinHint.NONE)
    }
    def walk(p: LogicalPlan): LogicalPlan =
      if (regrouping(p)) { if (reads(p)) restricted(p) else p } else p.withNewChildren(p.children.map(walk))
    (walk(plan), origins.toMap)
  }

  /**
   * A copy of `plan` (`renewed`), and the first column's id of each relation it reads mapped to
   * that of the relation it copies: which read of a source it is (SourceSubstitution's reads).
   */
  private def copied(plan: LogicalPlan): (LogicalPlan, Map[ExprId, ExprId]) = {
    val copy = renewed(plan)
    (copy, copy.collectLeaves().zip(plan.collectLeaves()).collect {
      case (c: LogicalRelation, o: LogicalRelation) => c.output.head.exprId -> o.output.head.exprId
    }.toMap)
  }

  /** `plan` with every attribute it defines given a new id: a second copy of it in one plan. */
  private def renewed(plan: LogicalPlan): LogicalPlan = plan.transformUpWithNewOutput {
    case r: LogicalPlan with MultiInstanceRelation =>
      val fresh = r.newInstance()
      (fresh, r.output.zip(fresh.output))
    case p: Project if p.projectList.exists(_.isInstanceOf[Alias]) =>
      val list = aliasesRenewed(p.projectList)
      (p.copy(projectList = list), renamed(p.projectList, list))
    case a: Aggregate if a.aggregateExpressions.exists(_.isInstanceOf[Alias]) =>
      val list = aliasesRenewed(a.aggregateExpressions)
      (a.copy(aggregateExpressions = list), renamed(a.aggregateExpressions, list))
    case w: Window =>
      val list = aliasesRenewed(w.windowExpressions)
      (w.copy(windowExpressions = list), renamed(w.windowExpressions, list))
    case w: WindowTableFunction =>
      val out = w.windowOutput.map(_.newInstance())
      (w.copy(windowOutput = out), w.windowOutput.zip(out))
    case g: Generate =>
      val out = g.generatorOutput.map(_.newInstance())
      (g.copy(generatorOutput = out), g.generatorOutput.zip(out))
  }

  private def aliasesRenewed(list: Seq[NamedExpression]): Seq[NamedExpression] =
    list.map { case a: Alias => a.newInstance(); case e => e }

  private def renamed(before: Seq[NamedExpression], after: Seq[NamedExpression]): Seq[(Attribute, Attribute)] =
    before.zip(after).collect { case (o: Alias, n) => (o.toAttribute, n.toAttribute) }

  /**
   * Why a view of rows cannot be kept by these rules as a whole: a read of a source on the flipping
   * side of two joins (their flips would compound: not computed), or under an aggregate on the
   * flipping side of one joined on an aggregate's value (the flips find their rows by the groups of
   * the change, whose values are partial; by group keys they are exact).
   */
  private def planReasons(plan: LogicalPlan): Seq[String] = {
    val leaves = plan.collectLeaves()
    val values = aggregateValues(plan)
    def onValues(leaf: LogicalPlan) = aboveRegroupings(plan).exists {
      case j: Join => flipsBy(j, _.exists(_ == leaf)) && j.condition.exists(readsValues(_, values))
      case _ => false
    }
    Seq("STACKED_OUTER_JOINS" -> leaves.exists(flippedAt(plan, _) > 1),
      "OUTER_JOIN_ON_AGGREGATE_VALUE" -> leaves.exists(l => regroupedAt(plan, l) && onValues(l)))
      .collect { case (reason, true) => reason }
  }

  /** Whether both sides of `j` read one table: its terms would each hold the change on one side only. */
  private def selfJoin(j: Join): Boolean = (tablesRead(j.left) & tablesRead(j.right)).nonEmpty

  /** A change is netted row by row (grouped by every column): a map column cannot be grouped. */
  private def outputReasons(plan: LogicalPlan): Seq[String] = {
    def hasMap(t: DataType): Boolean = t match {
      case _: MapType => true
      case a: ArrayType => hasMap(a.elementType)
      case s: StructType => s.fields.exists(f => hasMap(f.dataType))
      case _ => false
    }
    if (plan.output.exists(a => hasMap(a.dataType))) Seq("MAP_COLUMN") else Nil
  }
}
