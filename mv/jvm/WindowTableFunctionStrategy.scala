package io.mvengine

import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeReference, CreateNamedStruct, Expression, GetStructField, LessThan, Literal, NamedExpression}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.types.LongType
import org.apache.spark.sql.execution.{ExpandExec, FilterExec, ProjectExec, SparkPlan, SparkStrategy}
import org.apache.spark.sql.execution.aggregate.UpdatingSessionsExec

/**
 * Plans a [[WindowTableFunction]] as Spark's own physical operators:
 *  - TUMBLE: one Project adding the window columns;
 *  - HOP: an Expand with one projection per window a row can fall into (ceil(size / slide)),
 *    filtered to the windows that hold the row unless slide divides size (then all of them do);
 *  - CUMULATE: an Expand with size / step projections, filtered to the windows that hold the row;
 *  - SESSION: Spark's UpdatingSessionsExec (the operator behind session_window), which merges each
 *    key's rows, sorted by time, while the next row starts at or before the current end (t + gap);
 *    Spark adds the shuffle by key and the sort it needs.
 */
object WindowTableFunctionStrategy extends SparkStrategy {

  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case window: WindowTableFunction => planWindow(window, planLater(window.child)) :: Nil
    case _ => Nil
  }

  private def planWindow(w: WindowTableFunction, child: SparkPlan): SparkPlan = {
    val spec = w.spec
    val bounds = new WindowBounds(spec, w.timeColumn)
    def columns(start: Expression, end: Expression): Seq[Expression] =
      Seq(start, end, bounds.windowTime(end))
    spec.kind match {
      case WindowKind.Tumble =>
        val start = bounds.alignedStart(spec.size, spec.offset)
        ProjectExec(child.output ++ aliased(w, columns(bounds.toTime(start),
          bounds.toTime(bounds.plus(start, spec.size)))), child)
      case WindowKind.Hop =>
        val latest = bounds.alignedStart(spec.step, spec.offset)
        val projections = (0L until spec.windowsPerRow).map { i =>
          val start = bounds.plus(latest, -i * spec.step)
          child.output ++ columns(bounds.toTime(start), bounds.toTime(bounds.plus(start, spec.size)))
        }
        val expand = ExpandExec(projections, w.output, child)
        if (spec.size % spec.step == 0) expand else FilterExec(LessThan(w.timeColumn, w.windowEnd), expand)
      case WindowKind.Cumulate =>
        val start = bounds.alignedStart(spec.size, spec.offset)
        val projections = (1L to spec.windowsPerRow).map { k =>
          child.output ++ columns(bounds.toTime(start), bounds.toTime(bounds.plus(start, k * spec.step)))
        }
        FilterExec(LessThan(w.timeColumn, w.windowEnd), ExpandExec(projections, w.output, child))
      case WindowKind.Session => planSession(w, bounds, child)
      case WindowKind.EkuiperSession => planEkuiperSession(w, bounds, child)
    }
  }

  /** eKuiper's sessions over the whole input, on the aligned clock, then back to the time type. */
  private def planEkuiperSession(w: WindowTableFunction, bounds: WindowBounds, child: SparkPlan): SparkPlan = {
    val aligned = Alias(bounds.aligned, "_aligned_time")()
    val prepared = ProjectExec(child.output :+ aligned, child)
    val Seq(start, end) = Seq("_session_start", "_session_end").map(AttributeReference(_, LongType, nullable = false)())
    val sessions = EkuiperSessionExec(w.spec.step, w.spec.size, aligned.toAttribute, start, end, prepared)
    val endTime = bounds.toTime(end)
    ProjectExec(child.output ++ aliased(w, Seq(bounds.toTime(start), endTime, bounds.windowTime(endTime))), sessions)
  }

  private def planSession(w: WindowTableFunction, bounds: WindowBounds, child: SparkPlan): SparkPlan = {
    val keys: Seq[NamedExpression] = w.partitionBy.zipWithIndex.map {
      case (attribute: Attribute, _) => attribute
      case (expression, i) => Alias(expression, s"_session_key$i")()
    }
    val rowSession = Alias(CreateNamedStruct(Seq(Literal("start"), w.timeColumn,
      Literal("end"), bounds.timePlus(w.spec.size))), "_session")()
    val newKeys = keys.filterNot(_.isInstanceOf[Attribute])
    val prepared = ProjectExec(child.output ++ newKeys :+ rowSession, child)
    val session = rowSession.toAttribute
    val merged = UpdatingSessionsExec(isStreaming = false, numShufflePartitions = None,
      keys.map(_.toAttribute) :+ session, session, prepared)
    val end = GetStructField(session, 1)
    ProjectExec(child.output ++ aliased(w, Seq(GetStructField(session, 0), end, bounds.windowTime(end))),
      merged)
  }

  private def aliased(w: WindowTableFunction, columns: Seq[Expression]): Seq[NamedExpression] =
    w.windowOutput.zip(columns).map { case (attribute, e) =>
      Alias(e, attribute.name)(exprId = attribute.exprId)
    }
}
