package io.mvengine

import scala.collection.mutable
import scala.util.Try

import org.apache.spark.sql.catalyst.{FunctionIdentifier, TableIdentifier}
import org.apache.spark.sql.catalyst.analysis.{UnresolvedFunction, UnresolvedTableValuedFunction}
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.parser.{ParseException, ParserInterface}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.types.{DataType, StructType}

/**
 * Spark's parser, plus three things for window functions, the engine's own statements (the
 * refresh's commit [[RefreshCommit]], [[LateRowsCommit]], [[EngineCreate]]), and
 * `mv_refresh_history` read as a table ([[DeltaTables]]).
 *
 * Window function calls are bound to a [[WindowTableFunctionCall]] as soon as a statement is
 * parsed ([[ResolveWindowTableFunctions.Bind]]), before any analyzer rule can misread their
 * arguments. (An analyzer hint rule would run early enough, but Spark's Hive session state
 * ignores injected hint rules.)
 *
 * And Flink's verbatim window syntax is accepted:
 * {{{
 *   SELECT * FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
 * }}}
 * Spark's grammar wants `TUMBLE(TABLE(Bid), ...)` without the outer `TABLE(...)`. Only a statement
 * Spark rejects is rewritten (see [[FlinkWindowSyntax]]), and if the rewrite does not parse either,
 * Spark's original error is raised, so every statement Spark accepts means what it always meant.
 *
 * And eKuiper's window functions in GROUP BY ([[EkuiperWindows]]), with Lenses' duration literals
 * and eKuiper's `OVER(WHEN ...)` made parseable first ([[DialectSyntax]]).
 */
class WindowSqlParser(delegate: ParserInterface) extends ParserInterface {

  override def parsePlan(sqlText: String): LogicalPlan = {
    def literal(text: String): String = delegate.parseExpression(text).eval().toString
    MaterializedViewStatements.parse(sqlText)
      .orElse(RefreshCommit.parse(sqlText, literal))
      .orElse(LateRowsCommit.parse(sqlText, literal))
      .orElse(EngineCreate.parse(sqlText, literal))
      .getOrElse(DeltaTables.asTableFunction(parseWindowed(sqlText, delegate.parsePlan)))
  }

  /**
   * A query alone, as Spark parses a view's text when the view is read: bound like a statement's,
   * so a view over a window function reads back. Spark 4.0 and 4.1 look functions up
   * (LookupFunctions) before any resolution rule runs, and would reject the view's DESCRIPTOR.
   */
  override def parseQuery(sqlText: String): LogicalPlan =
    DeltaTables.asTableFunction(parseWindowed(sqlText, delegate.parseQuery))

  private def parseWindowed(sqlText: String, parse: String => LogicalPlan): LogicalPlan =
    EsperDataWindows.Bind(ResolveWindowTableFunctions.Bind(
      EkuiperWindows.rewrite(parseWithFlinkSyntax(DialectSyntax.rewrite(sqlText), parse))))

  private def parseWithFlinkSyntax(sqlText: String, parse: String => LogicalPlan): LogicalPlan = {
    val parsed = try Right(parse(sqlText)) catch { case e: ParseException => Left(e) }
    if (parsed.exists(plan => !wrapsWindowCall(plan))) return parsed.toOption.get
    FlinkWindowSyntax.rewrite(sqlText)
      .flatMap(rewritten => Try(parse(rewritten)).toOption)
      .getOrElse(parsed.fold(error => throw error, identity))
  }

  /** `TABLE(TUMBLE(...))` as Spark parses it: a table function TABLE of a scalar call TUMBLE. */
  private def wrapsWindowCall(plan: LogicalPlan): Boolean = plan.collectWithSubqueries {
    case call: UnresolvedTableValuedFunction if call.name.map(_.toLowerCase) == Seq("table") &&
        call.functionArgs.exists {
          case f: UnresolvedFunction => WindowKind.find(f.nameParts).isDefined
          case _ => false
        } => call
  }.nonEmpty

  override def parseExpression(sqlText: String): Expression = delegate.parseExpression(sqlText)
  override def parseTableIdentifier(sqlText: String): TableIdentifier = delegate.parseTableIdentifier(sqlText)
  override def parseFunctionIdentifier(sqlText: String): FunctionIdentifier =
    delegate.parseFunctionIdentifier(sqlText)
  override def parseMultipartIdentifier(sqlText: String): Seq[String] =
    delegate.parseMultipartIdentifier(sqlText)
  override def parseTableSchema(sqlText: String): StructType = delegate.parseTableSchema(sqlText)
  override def parseDataType(sqlText: String): DataType = delegate.parseDataType(sqlText)
  override def parseRoutineParam(sqlText: String): StructType = delegate.parseRoutineParam(sqlText)
}

/**
 * Rewrites Flink's window-call forms into Spark's, token by token (strings, quoted identifiers and
 * comments are left untouched):
 *  - `TABLE(TUMBLE(...))` (any window function) loses the outer `TABLE(` and its `)`;
 *  - `TABLE name` as a function argument (after `(`, `,` or `=>`) becomes `TABLE(name)`;
 *  - `PARTITION BY key,` (Flink's single bare key before the next argument) becomes
 *    `PARTITION BY (key),`, since Spark would read the following arguments as more keys.
 */
object FlinkWindowSyntax {

  private[mvengine] case class Token(text: String, isWord: Boolean) {
    def is(word: String): Boolean = isWord && text.equalsIgnoreCase(word)
    def isSpace: Boolean = text.isEmpty || text.head.isWhitespace || text.startsWith("--") || text.startsWith("/*")
  }

  def rewrite(sql: String): Option[String] = {
    val tokens = tokenize(sql)
    val dropped = mutable.Set[Int]()
    val before = mutable.Map[Int, String]().withDefaultValue("")
    val after = mutable.Map[Int, String]().withDefaultValue("")
    def next(i: Int): Int = (i + 1 until tokens.size).find(j => !tokens(j).isSpace).getOrElse(tokens.size)
    def prev(i: Int): Int = (i - 1 to 0 by -1).find(j => !tokens(j).isSpace).getOrElse(-1)
    def at(i: Int): Option[Token] = if (i >= 0 && i < tokens.size) Some(tokens(i)) else None
    for (i <- tokens.indices if tokens(i).is("TABLE")) {
      val open = next(i)
      val function = next(open)
      if (at(open).exists(_.text == "(") && at(function).exists(t => WindowKind.find(Seq(t.text)).isDefined) &&
          at(next(function)).exists(_.text == "(")) {
        dropped ++= Seq(i, open) ++ matchingClose(tokens, open)
      } else if (at(prev(i)).exists(t => Set("(", ",", "=>").contains(t.text)) && at(open).exists(_.isWord)) {
        val last = identifierEnd(tokens, open, next)
        before(open) = "("
        after(last) = ")"
      }
    }
    for (i <- tokens.indices if tokens(i).is("PARTITION") && at(next(i)).exists(_.is("BY"))) {
      val key = next(next(i))
      if (at(key).exists(_.isWord)) {
        val last = identifierEnd(tokens, key, next)
        if (at(next(last)).exists(_.text == ",")) {
          before(key) = before(key) + "("
          after(last) = after(last) + ")"
        }
      }
    }
    if (dropped.isEmpty && before.isEmpty) None
    else Some(tokens.indices.map { i =>
      if (dropped(i)) "" else before(i) + tokens(i).text + after(i)
    }.mkString)
  }

  /** The last token of a dotted identifier starting at `start` (`a`, `db.a`, `` `my table` ``). */
  private def identifierEnd(tokens: IndexedSeq[Token], start: Int, next: Int => Int): Int = {
    var last = start
    while (next(last) < tokens.size && tokens(next(last)).text == "." &&
      next(next(last)) < tokens.size && tokens(next(next(last))).isWord) {
      last = next(next(last))
    }
    last
  }

  private[mvengine] def matchingClose(tokens: IndexedSeq[Token], open: Int): Option[Int] = {
    var depth = 0
    (open until tokens.size).find { j =>
      if (tokens(j).text == "(") depth += 1
      if (tokens(j).text == ")") depth -= 1
      depth == 0
    }
  }

  private[mvengine] def tokenize(sql: String): IndexedSeq[Token] = {
    val tokens = mutable.ArrayBuffer[Token]()
    var i = 0
    def take(end: Int, isWord: Boolean): Unit = { tokens += Token(sql.substring(i, end), isWord); i = end }
    def quoted(quote: Char): Int = {
      var j = i + 1
      while (j < sql.length && sql(j) != quote) j += (if (sql(j) == '\\') 2 else 1)
      math.min(j + 1, sql.length)
    }
    while (i < sql.length) {
      val c = sql(i)
      if (c.isWhitespace) take(sql.indexWhere(!_.isWhitespace, i) match { case -1 => sql.length; case j => j }, false)
      else if (sql.startsWith("--", i)) take(sql.indexOf('\n', i) match { case -1 => sql.length; case j => j }, false)
      else if (sql.startsWith("/*", i)) take(sql.indexOf("*/", i + 2) match { case -1 => sql.length; case j => j + 2 }, false)
      else if (c == '\'' || c == '"') take(quoted(c), false)
      else if (sql.startsWith("=>", i)) take(i + 2, false)
      else if (c == '`') take(quoted('`'), true)
      else if (c.isLetterOrDigit || c == '_') take(sql.indexWhere(ch => !(ch.isLetterOrDigit || ch == '_'), i) match {
        case -1 => sql.length; case j => j }, true)
      else take(i + 1, false)
    }
    tokens.toIndexedSeq
  }
}
