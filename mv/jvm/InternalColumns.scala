package io.mvengine

/**
 * The helper columns the commit adds beside a view's columns, named in one place (Python's
 * names: mv/internal_columns.py). Every one begins with `__mv_`, a prefix no view's query may use
 * for an output column or read in a source (mv/internal_columns.py, `check`, at CREATE and REFRESH),
 * so a user's column of any other name (`__op`, `__file`, `__row`...) is never taken for one.
 *
 * {{{
 *   source.withColumn(InternalColumns.S, lit(true))   // beside the view's columns, whatever they are
 * }}}
 */
object InternalColumns {
  val Prefix = "__mv_"

  val Op = Prefix + "op"                // a merge's source row: 'upsert', 'delete', 'insert' or 'region'
  val File = Prefix + "file"            // a view row's file
  val Row = Prefix + "row"              // its index in the file (-1 without deletion vectors)
  val T = Prefix + "t"                  // the view's side of the outer join is present
  val S = Prefix + "s"                  // the source's side is present
  val Action = Prefix + "action"        // keep, update, delete, insert or none
  val InSource = Prefix + "in_source"   // the row came from the merge's source
  val Old = Prefix + "old"              // the view row, as a struct of the view's columns
  val New = Prefix + "new"              // the source row, likewise
  val Condition = Prefix + "c"          // the local merge's resolved conditions, numbered
  val Sign = Prefix + "sign"            // a change row's sign, +1 or -1 (SourceSubstitution's signed terms)
}
