package io.mvengine

import scala.util.control.NonFatal

import org.apache.spark.sql.catalyst.planning.PhysicalOperation
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, LogicalPlan, Repartition, RepartitionOperation}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.delta.files.TahoeBatchFileIndex
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, LogicalRelation}
import org.apache.spark.sql.internal.SQLConf

/**
 * An aggregate over a small read of one Delta table, its files known in the driver
 * (SmallDeltaScans), reads them in one task, so its groups need no shuffle: a refresh recomputing
 * the windows a 1,000-row change touches read one file of its source, and the shuffle between the
 * partial and the final aggregate, a second Spark stage, cost about half of that recomputation
 * (100-200 ms against 60-100 ms on two cores, bench/fixed_cost.py's view).
 *
 * "Small" is what Spark reads as one split anyway: files whose bytes, after skipping by the
 * filters on the scan, sum to at most `spark.sql.files.openCostInBytes` (4 MB). The rows do not
 * change, only how many tasks read them: the aggregate's input is coalesced into one partition
 * (Spark's COALESCE(1), no shuffle), which satisfies the grouping's distribution. Only a plan with
 * this one leaf below the aggregate (no join, no union, no repartition already) is changed, in
 * any query of a session with the extension unless `mv.oneTaskAggregates` is set to false.
 *
 * Example: `SELECT k, count(*) FROM TUMBLE(TABLE(t), DESCRIPTOR(ts), INTERVAL 1 MINUTE)
 * WHERE window_start >= X GROUP BY k` with one 100 KB file of `t` after X: one job of one stage.
 */
object OneTaskAggregates extends Rule[LogicalPlan] {
  /** "false" leaves every aggregate's input as Spark splits it. */
  val Enabled = "mv.oneTaskAggregates"

  override def apply(plan: LogicalPlan): LogicalPlan =
    if (!SQLConf.get.getConfString(Enabled, "true").toBoolean) plan
    else plan.transformUp {
      case a: Aggregate if small(a.child) =>
        a.copy(child = Repartition(1, shuffle = false, a.child))
    }

  /** Whether `input` reads one Delta table's listed files (its one leaf: no join, no union),
   *  at most one split's bytes of them after its filters skip files, and repartitions nowhere. */
  private def small(input: LogicalPlan): Boolean = {
    val leaves = input.collectLeaves()
    leaves.size == 1 && !input.exists(_.isInstanceOf[RepartitionOperation]) && (leaves.head match {
      case r: LogicalRelation => r.relation match {
        case HadoopFsRelation(index: ChecksumFileIndex, _, _, _, _, _) =>
          bytes(input, index).exists(_ <= SQLConf.get.filesOpenCostInBytes)
        case _ => false
      }
      case _ => false
    })
  }

  /** The bytes of `index`'s files that the filters right above the scan leave (all of them when
   *  the filters are further up); None if Delta cannot say. */
  private def bytes(input: LogicalPlan, index: TahoeBatchFileIndex): Option[Long] = try {
    val filters = input.collectFirst { case PhysicalOperation(_, conditions, _: LogicalRelation) => conditions }
    Some(index.matchingFiles(Nil, filters.getOrElse(Nil)).map(_.size).sum)
  } catch {
    case NonFatal(_) => None
  }
}
