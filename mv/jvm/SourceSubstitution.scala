package io.mvengine

import scala.collection.mutable

import com.fasterxml.jackson.databind.ObjectMapper

import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, ExprId, Expression, ExpressionInfo, Literal}
import org.apache.spark.sql.catalyst.plans.logical.{LocalRelation, LogicalPlan, Project, Union}
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.datasources.LogicalRelation
import org.apache.spark.sql.types.StringType

import io.mvengine.{InternalColumns => IC}

/**
 * A view's query with one of its source tables replaced by another relation of the same columns:
 * {{{
 *   SELECT * FROM mv_substitute('<view query>', 'spark_catalog.default.bids', 'affected_bids')
 * }}}
 * The maintainer recomputes only what changed by running the view's own query over just the
 * source rows that can affect it (for SESSION windows: the rows of the touched sessions), without
 * re-parsing or rewriting the query's text. The replacement must have every column of the source
 * (extra columns are ignored); each keeps the source column's identity, so the rest of the
 * analysed plan stays as it was. Several sources take several pairs (joined SESSION windows):
 * `mv_substitute('<query>', 'bids', 'affected_bids', 'asks', 'affected_asks')`.
 */
object SourceSubstitution {

  val functionName = "mv_substitute"

  val changeFunctionName = "mv_substitute_change"

  val signedFunctionName = "mv_substitute_signed_change"

  val keysFunctionName = "mv_substitute_keys"

  val flipsFunctionName = "mv_substitute_flips"

  val regroupsFunctionName = "mv_substitute_regroups"

  def registration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) = (
    FunctionIdentifier(functionName),
    new ExpressionInfo(getClass.getName, null, functionName,
      "mv_substitute(query, source_table, replacement) - The query with source_table read from replacement.", ""),
    (args: Seq[Expression]) => substitute(strings(functionName, args, 1), None))

  /**
   * The change of a query of rows through one changed source (mv/row_refresh.py, DeltaRules.scala):
   * {{{
   *   SELECT * FROM mv_substitute_change('<query>', 'bids', 'bids', 'bid_inserts', 'auctions', 'auctions VERSION AS OF 3')
   * }}}
   * as mv_substitute, after the branches of every UNION that do not read the changed source are
   * made empty: their sources did not change in this term of the sum, so they contribute nothing.
   */
  def changeRegistration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) =
    throughChange(changeFunctionName, "The change of query through changed_source: its UNION branches that " +
      "do not read it are empty.", _ => Linear)

  /**
   * The change of a query of rows through one changed source, both of its sides in one term
   * (mv/row_refresh.py), the sign of each row (the change's `__mv_sign`) its last column:
   * {{{
   *   SELECT * FROM mv_substitute_signed_change('<query>', 'auctions', 'bids', 'bids VERSION AS OF 7', 'auctions', 'auction_changes')
   * }}}
   * as mv_substitute_change, with the sign carried through the operators above the change
   * (DeltaRules.signed: projections, filters, joins, UNION ALL), so the other sources are read once.
   */
  def signedRegistration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) =
    throughChange(signedFunctionName, "The change of query through changed_source, each row's sign its last " +
      "column.", _ => Signed)

  /**
   * The keys of the rows a change through one source reaches, a superset (mv/row_refresh.py's
   * groups by change, partitions):
   * {{{
   *   SELECT category FROM mv_substitute_keys('<query>', 'bids', '["category"]', 'bids', 'bid_changes', 'auctions', 'auctions')
   * }}}
   * as mv_substitute_change, with the query first rewritten by DeltaRules.forKeys (outer joins
   * joined to the change's matches only, filters over aggregates dropped), then cut to the key
   * columns over the change alone where each is one of its columns (ChangedKeys: no other source
   * read). The output holds the key columns, and others only when it is not cut.
   */
  def keysRegistration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) =
    throughChange(keysFunctionName, "A superset of the keys (a JSON array of output columns) of the rows of query " +
      "that changed_source's rows in replacement reach.", k => Keys(k.head), extra = Seq("keys"))

  /**
   * The rows of a query of rows that a change through one source flips, at one version of it
   * (DeltaRules.flips: an outer join's padded rows, a semi or anti join's rows, whose match came or
   * went):
   * {{{
   *   SELECT * FROM mv_substitute_flips('<query>', 'bids', 'bid_changes', 'bids', 'bids VERSION AS OF 7', 'auctions', 'auctions')
   * }}}
   * as mv_substitute_change, the changed source's replacement giving its version, the third
   * argument the change, which picks the other side's rows that may have flipped.
   */
  def flipsRegistration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) =
    throughChange(flipsFunctionName, "The rows of query whose match changed_source's change brings or takes, " +
      "at the version its replacement reads.", change => Flips(change.head), extra = Seq("change"))

  /**
   * A query of rows over aggregates of a changed source, at one version of it (DeltaRules.regroups):
   * each aggregate reading it keeps only the groups its change reaches.
   * {{{
   *   SELECT * FROM mv_substitute_regroups('<query>', 'auctions', 'auction_changes', 'auctions', 'auctions VERSION AS OF 7', 'persons', 'persons')
   * }}}
   * as mv_substitute_flips: the changed source's replacement gives its version, the third argument
   * the change, whose groups are the ones recomputed.
   */
  def regroupsRegistration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) =
    throughChange(regroupsFunctionName, "The query with each aggregate of changed_source keeping the groups its " +
      "change reaches, at the version its replacement reads.", change => Regroups(change.head), extra = Seq("change"))

  /**
   * A table function `name(query, changed_source, <extra>..., source_table, replacement, ...)`
   * described by `usage`, rewriting the query by the `term` its extra arguments give.
   */
  private def throughChange(name: String, usage: String, term: Seq[String] => Term, extra: Seq[String] = Nil)
      : (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) = (
    FunctionIdentifier(name),
    new ExpressionInfo(getClass.getName, null, name,
      s"$name(query, changed_source, ${extra.map(_ + ", ").mkString}source_table, replacement, ...) - $usage", ""),
    (args: Seq[Expression]) => {
      val texts = strings(name, args, 2 + extra.size)
      substitute(texts.head +: texts.drop(2 + extra.size), Some(texts(1)), term(texts.slice(2, 2 + extra.size)))
    })

  /** How a term through one changed source rewrites the query before its sources are replaced;
   * `change`, the relation some of its reads of that source read instead. */
  private sealed trait Term { def change: Option[String] = None }
  private case object Linear extends Term
  private case object Signed extends Term
  private case class Keys(json: String) extends Term {
    def columns: Seq[String] = new ObjectMapper().readValue(json, classOf[Array[String]]).toSeq
  }
  private case class Flips(text: String) extends Term { override def change: Option[String] = Some(text) }
  private case class Regroups(text: String) extends Term { override def change: Option[String] = Some(text) }

  private def strings(name: String, args: Seq[Expression], leading: Int): Seq[String] = args match {
    case _ if args.size > leading && (args.size - leading) % 2 == 0 && args.forall {
          case l: Literal => l.dataType == StringType && l.value != null
          case _ => false
        } => args.map(_.toString)
    case _ => throw new IllegalArgumentException(
      s"$name takes string literals: the query${if (leading > 1) ", the changed source" else ""}, " +
        "then one or more source tables each with its replacement")
  }

  /**
   * `plan` as a term through the changed source `reads` marks: UNION branches that do not read it
   * emptied (they did not change in this term), then rewritten by `term`'s rules (DeltaRules); with
   * the relations the rules copied (a Flips or Regroups term's), each first column's id mapped to
   * its original's.
   */
  private def rewritten(plan: LogicalPlan, reads: LogicalPlan => Boolean, term: Term)
      : (LogicalPlan, Map[ExprId, ExprId]) = {
    val pruned = plan.transformDown {
      case u: Union => u.withNewChildren(u.children.map(c => if (reads(c)) c else LocalRelation(c.output)))
    }
    term match {
      case keys: Keys =>
        val found = DeltaRules.forKeys(pruned, reads)
        (ChangedKeys.cut(found, reads, keys.columns).getOrElse(found), Map.empty)
      case Linear | Signed => (DeltaRules.linear(pruned, reads), Map.empty)
      case Flips(_) => DeltaRules.flips(pruned, reads)
      case Regroups(_) => DeltaRules.regroups(DeltaRules.linear(pruned, reads), reads)  // flips: a term of their own
    }
  }

  /**
   * A source as the arguments name it: a table, every read of it; or `<table>#<k>`, its k-th read
   * (from 0, in the order of the plan's leaves, as mv_describe lists its sources), so that the
   * terms of a self-join read each side at its own version.
   */
  private case class Named(parts: Seq[String], read: Option[Int])

  private val OneRead = "(?s)(.+)#(\\d+)".r

  private def named(text: String): Named = {
    val parser = SparkSession.active.sessionState.sqlParser
    def parts(table: String) = parser.parseMultipartIdentifier(table).map(_.toLowerCase)
    text match {
      case OneRead(table, k) => Named(parts(table), Some(k.toInt))
      case _ => Named(parts(text), None)
    }
  }

  /** Each catalog table's reads in `plan`, by their first column's id: which read of its table each is. */
  private def readsOf(plan: LogicalPlan): Map[ExprId, Int] =
    plan.collectLeaves().distinct.collect { case r: LogicalRelation if r.catalogTable.isDefined => r }
      .groupBy(DeltaRules.tableParts).values
      .flatMap(_.zipWithIndex.map { case (r, k) => r.output.head.exprId -> k }).toMap

  /** One pass, so a replacement's own reads of another source (its rows' regions) stay as they are. */
  private def substitute(texts: Seq[String], changed: Option[String], term: Term = Linear): LogicalPlan = {
    val queryText = texts.head
    val replacements = texts.tail.grouped(2).map(p => p(0) -> p(1)).toSeq
    val session = SparkSession.active
    def analyse(text: String): LogicalPlan =
      session.sessionState.executePlan(session.sessionState.sqlParser.parsePlan(text)).analyzed
    val resolver = session.sessionState.conf.resolver
    val analysed = analyse(queryText)
    val reads = readsOf(analysed)
    // The relations the term's rules copied, by their first column's id, to the id of the one copied.
    var origins = Map.empty[ExprId, ExprId]
    def matches(relation: LogicalRelation, source: Named): Boolean = DeltaRules.isTable(relation, source.parts) &&
      source.read.forall { k => val id = relation.output.head.exprId; reads.get(origins.getOrElse(id, id)).contains(k) }
    val byName = replacements.map { case (source, text) => (source, named(source), text, analyse(s"SELECT * FROM $text")) }
    def target(relation: LogicalRelation) = byName.find { case (_, name, _, _) => matches(relation, name) }
    val changedSource = changed.map(named)
    val query = changedSource match {
      case Some(source) =>
        val (plan, copies) = rewritten(analysed, _.exists { case r: LogicalRelation => matches(r, source); case _ => false },
          term)
        origins = copies
        plan
      case None => analysed
    }
    // A Flips or Regroups term reads the change where its copies read the changed source.
    def readsChange(relation: LogicalRelation) =
      origins.contains(relation.output.head.exprId) && changedSource.exists(matches(relation, _))
    val change = term.change.map(text => analyse(s"SELECT * FROM $text"))
    def aliased(relation: LogicalRelation, replacement: LogicalPlan, text: String) =
      Project(relation.output.map { column =>
        val from = replacement.output.find(a => resolver(a.name, column.name)).getOrElse(
          throw new IllegalArgumentException(s"$text has no column ${column.name}"))
        Alias(from, column.name)(exprId = column.exprId)
      }, replacement)
    val replaced = mutable.Set[String]()
    // A Signed term's read of the change, with the change's sign beside its columns.
    var signedRead: Option[(LogicalPlan, Attribute)] = None
    def withSign(read: Project, replacement: LogicalPlan): LogicalPlan = {
      val sign = Alias(replacement.output.find(a => resolver(a.name, IC.Sign)).getOrElse(
        throw new IllegalArgumentException(s"the change has no column ${IC.Sign}")), IC.Sign)()
      val out = read.copy(projectList = read.projectList :+ sign)
      signedRead = Some(out -> sign.toAttribute)
      out
    }
    val result = query.transformUp {
      case relation: LogicalRelation if change.isDefined && readsChange(relation) =>
        aliased(relation, change.get, "the change")
      case relation: LogicalRelation if target(relation).isDefined =>
        val (source, _, text, replacement) = target(relation).get
        replaced += source
        val read = aliased(relation, replacement, text)
        if (term == Signed && changedSource.exists(matches(relation, _))) withSign(read, replacement) else read
    }
    if (term == Signed) {
      val (base, sign) = signedRead.getOrElse(throw new IllegalArgumentException("the query does not read the change"))
      return DeltaRules.signed(result, base, sign)
    }
    // A change's pruned branches may have held a source's only read.
    replacements.map(_._1).find(s => changed.isEmpty && !replaced.contains(s)).foreach { source =>
      throw new IllegalArgumentException(s"the query does not read $source")
    }
    result
  }
}
