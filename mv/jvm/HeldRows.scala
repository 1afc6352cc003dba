package io.mvengine

import org.apache.spark.sql.{classic, DataFrame, Row}
import org.apache.spark.sql.catalyst.plans.physical.UnknownPartitioning
import org.apache.spark.sql.delta.DataFrameUtils
import org.apache.spark.sql.execution.LogicalRDD

/**
 * A refresh's intermediate rows (the net change and the rows its merge applies: writes.counted,
 * writes._copies), computed once and held in Spark's cache, as a DataFrame whose plan is those
 * rows alone: a `LogicalRDD` over the cache's scan, not the whole query that made them.
 *
 * Why: a cached DataFrame keeps its lineage. Every later statement built on it analyses that
 * lineage again (DeduplicateRelations walks it), canonicalizes it to find the caches in it, and
 * prints it, nested caches and all, into its execution's plan description. A top-N view's commit
 * stacked the touched keys, the query and the view's rows of them, the net change and the rows to
 * merge, and Nexmark's q6 at 1M bids spent about 4 s of a 15 s refresh in the driver between
 * the commit's Spark jobs doing that for 287 rows (jstack samples: DeduplicateRelations, Join.doCanonicalize,
 * TreeNode.generateTreeString). A plan of one leaf costs nothing to analyse.
 *
 * Unlike `Dataset.localCheckpoint`, the rows stay recomputable: the RDD reads the cache, whose
 * blocks Spark rebuilds from their lineage if an executor that held them is lost. The leaf's
 * statistics are the cache's measured size, so a small result is still known small (broadcast).
 * {{{
 *   val net = frame.cache(); HeldRows.of(net)   // LogicalRDD [auction, price, __mv_n]
 * }}}
 */
object HeldRows {
  /** `frame` (already marked cached) computed now into its cache, as a plan of one leaf over it. */
  def of(frame: DataFrame): DataFrame = {
    val cached = frame.asInstanceOf[classic.Dataset[Row]]
    val spark = cached.sparkSession
    Maintainer.asActive(spark) {
      cached.count()  // fills the cache: a Spark execution of its own, labelled as the caller's
      val relation = spark.sharedState.cacheManager.lookupCachedData(cached).map(_.cachedRepresentation)
        .getOrElse(throw new IllegalStateException("HeldRows.of: the frame is not cached"))
      val filled = relation.withOutput(relation.output)  // a new node: its statistics the filled cache's size
      val leaf = LogicalRDD(cached.queryExecution.analyzed.output, DataFrameUtils.ofRows(spark, filled).queryExecution.toRdd,
        UnknownPartitioning(0), Nil, isStreaming = false)(spark, Some(filled.stats), None)
      DataFrameUtils.ofRows(spark, leaf)
    }
  }
}
