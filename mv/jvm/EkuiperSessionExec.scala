package io.mvengine

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Ascending, Attribute, AttributeReference, SortOrder, UnsafeProjection}
import org.apache.spark.sql.catalyst.expressions.codegen.GenerateUnsafeRowJoiner
import org.apache.spark.sql.catalyst.plans.physical.{AllTuples, Distribution}
import org.apache.spark.sql.execution.{SparkPlan, UnaryExecNode}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.types.LongType

/**
 * eKuiper's session window over the whole input, in one pass over the rows sorted by time.
 *
 * Times are microseconds on the aligned clock (column `time`, see [[WindowBounds]]). A session
 * starts at its first row s. The next row t joins it unless
 *  - t - last > timeout: the session ends at last + timeout (rows exactly timeout apart join);
 *  - t >= c, where c = floorDiv(s, maxDuration) * maxDuration + 2 * maxDuration is the first
 *    multiple of maxDuration with c - maxDuration > s: the session has lasted over maxDuration at
 *    the check c, so it ends at c (the earlier of the two ends wins).
 * Either way t starts the next session. The checks sit at multiples of maxDuration (eKuiper:
 * "if the max duration is 10, the checks happen at t = 0, 10, 20, 30"), so a session may last up
 * to twice maxDuration. Output: the child's columns plus the session's start and end.
 *
 * Example, maxDuration 10, timeout 4: rows 1, 4, 8, 11, 14, 17, 21 give [1, 20) with 1..17 and
 * [21, 25) with 21.
 */
case class EkuiperSessionExec(timeout: Long, maxDuration: Long, time: Attribute,
                              windowStart: Attribute, windowEnd: Attribute, child: SparkPlan)
  extends UnaryExecNode {

  override def output: Seq[Attribute] = child.output ++ Seq(windowStart, windowEnd)
  override def requiredChildDistribution: Seq[Distribution] = AllTuples :: Nil
  override def requiredChildOrdering: Seq[Seq[SortOrder]] = Seq(Seq(SortOrder(time, Ascending)))

  override protected def doExecute(): RDD[InternalRow] = {
    val timeIndex = child.output.indexWhere(_.exprId == time.exprId)
    val (schema, timeout, maxDuration) = (DataTypeUtils.fromAttributes(child.output), this.timeout, this.maxDuration)
    child.execute().mapPartitions { rows =>
      val bounds = UnsafeProjection.create(Array[org.apache.spark.sql.types.DataType](LongType, LongType))
      val joiner = GenerateUnsafeRowJoiner.create(schema, DataTypeUtils.fromAttributes(
        Seq(AttributeReference("start", LongType)(), AttributeReference("end", LongType)())))
      val toUnsafe = UnsafeProjection.create(schema)
      val session = ArrayBuffer[InternalRow]()
      var (start, last) = (0L, 0L)
      def close(end: Long): Iterator[InternalRow] = {
        val window = bounds(InternalRow(start, end)).copy()
        val closed = session.toArray.iterator.map(row => joiner.join(toUnsafe(row), window).copy())
        session.clear()
        closed
      }
      rows.flatMap { row =>
        val t = row.getLong(timeIndex)
        val closed = if (session.isEmpty) Iterator.empty else {
          val check = Math.floorDiv(start, maxDuration) * maxDuration + 2 * maxDuration
          val byTimeout = if (t - last > timeout) last + timeout else Long.MaxValue
          val byCheck = if (t >= check) check else Long.MaxValue
          val end = math.min(byTimeout, byCheck)
          if (end == Long.MaxValue) Iterator.empty else close(end).toArray.iterator
        }
        if (session.isEmpty) start = t
        last = t
        session += row.copy()
        closed
      } ++ Iterator.single(()).flatMap(_ => if (session.isEmpty) Iterator.empty else close(last + timeout))
    }
  }

  override protected def withNewChildInternal(newChild: SparkPlan): EkuiperSessionExec = copy(child = newChild)
}
