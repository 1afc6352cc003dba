package io.mvengine

/**
 * Token rewrites that let Spark's grammar parse two foreign spellings (strings, quoted identifiers
 * and comments are left untouched, see [[FlinkWindowSyntax.tokenize]]):
 *  - Lenses' duration literals inside a window table function call: `100ms`, `10s`, `5m`, `2h`,
 *    `1d` become `INTERVAL '0.100' SECOND`, `INTERVAL '10' SECOND`, ... Outside those calls `10s`
 *    keeps Spark's meaning (a SMALLINT literal);
 *  - eKuiper's `OVER(WHEN cond)` after a window function becomes `OVER(PARTITION BY cond)`, which
 *    [[EkuiperWindows]] reads back as the trigger condition. `OVER (WHEN` is never valid Spark SQL.
 *
 * Example:
 * {{{
 *   DialectSyntax.rewrite("SELECT * FROM TUMBLE(t, ts, 10s)")
 *   // "SELECT * FROM TUMBLE(t, ts, INTERVAL '10' SECOND)"
 * }}}
 */
object DialectSyntax {
  private val Duration = "([0-9]+)(ms|s|m|h|d)".r
  private val Units = Map("s" -> "SECOND", "m" -> "MINUTE", "h" -> "HOUR", "d" -> "DAY")

  def rewrite(sql: String): String = {
    val lower = sql.toLowerCase
    if (!lower.contains("when") && !WindowKind.all.exists(k => lower.contains(k.name.toLowerCase))) return sql
    val tokens = FlinkWindowSyntax.tokenize(sql)
    def next(i: Int): Int = (i + 1 until tokens.size).find(j => !tokens(j).isSpace).getOrElse(tokens.size)
    def at(i: Int) = if (i < tokens.size) Some(tokens(i)) else None
    val replaced = scala.collection.mutable.Map[Int, String]()
    for (i <- tokens.indices) {
      val open = next(i)
      if (tokens(i).isWord && WindowKind.find(Seq(tokens(i).text)).isDefined && at(open).exists(_.text == "(")) {
        val close = FlinkWindowSyntax.matchingClose(tokens, open).getOrElse(tokens.size - 1)
        for (j <- open to close; literal <- duration(tokens(j))) replaced(j) = literal
      }
      if (tokens(i).is("OVER") && at(open).exists(_.text == "(") && at(next(open)).exists(_.is("WHEN"))) {
        replaced(next(open)) = "PARTITION BY"
      }
    }
    if (replaced.isEmpty) sql else tokens.indices.map(i => replaced.getOrElse(i, tokens(i).text)).mkString
  }

  private def duration(token: FlinkWindowSyntax.Token): Option[String] = token.text match {
    case Duration(n, "ms") if token.isWord =>
      Some(s"INTERVAL '${BigDecimal(n) / 1000}' SECOND")
    case Duration(n, unit) if token.isWord => Some(s"INTERVAL '$n' ${Units(unit)}")
    case _ => None
  }
}
