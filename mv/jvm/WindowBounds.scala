package io.mvengine

import org.apache.spark.sql.catalyst.expressions.{Add, Cast, Expression, Literal, Pmod, PreciseTimestampConversion, Subtract}
import org.apache.spark.sql.types.{DataType, LongType, TimestampNTZType, TimestampType}

/**
 * Window bounds as Spark's own expressions (whole-stage code generation, no UDFs).
 *
 * Bounds are computed on an "aligned clock" in microseconds: the value itself for TIMESTAMP_NTZ,
 * wall-clock time in the session time zone for TIMESTAMP (so a one-day window runs from local
 * midnight to local midnight, as in Flink's TIMESTAMP_LTZ). Zones with a fixed offset, UTC among
 * them, need only a shift; zones with daylight saving go through Spark's zone conversion.
 *
 * start(t) = t - floorMod(t - offset, step), DESIGN.md rule 2.
 */
class WindowBounds(spec: WindowSpec, time: Expression) {
  private val dataType: DataType = time.dataType

  private def long(value: Long): Expression = Literal(value, LongType)

  /** The row's time on the aligned clock. */
  val aligned: Expression = (dataType, spec.fixedZoneOffsetMicros) match {
    case (TimestampNTZType, _) => PreciseTimestampConversion(time, TimestampNTZType, LongType)
    case (_, Some(0L)) => PreciseTimestampConversion(time, TimestampType, LongType)
    case (_, Some(shift)) => Add(PreciseTimestampConversion(time, TimestampType, LongType), long(shift))
    case (_, None) =>
      PreciseTimestampConversion(Cast(time, TimestampNTZType, spec.timeZone), TimestampNTZType, LongType)
  }

  /** A point on the aligned clock as a value of the time column's type. */
  def toTime(alignedMicros: Expression): Expression = (dataType, spec.fixedZoneOffsetMicros) match {
    case (TimestampNTZType, _) => PreciseTimestampConversion(alignedMicros, LongType, TimestampNTZType)
    case (_, Some(0L)) => PreciseTimestampConversion(alignedMicros, LongType, TimestampType)
    case (_, Some(shift)) =>
      PreciseTimestampConversion(Subtract(alignedMicros, long(shift)), LongType, TimestampType)
    case (_, None) => Cast(PreciseTimestampConversion(alignedMicros, LongType, TimestampNTZType),
      TimestampType, spec.timeZone)
  }

  /** start(t) on the aligned clock for windows starting every `period` microseconds. */
  def alignedStart(period: Long, offset: Long): Expression =
    Subtract(aligned, Pmod(Subtract(aligned, long(offset)), long(period)))

  def plus(alignedMicros: Expression, micros: Long): Expression =
    if (micros == 0) alignedMicros else Add(alignedMicros, long(micros))

  /** window_time: one microsecond before window_end (Spark's window_time convention). */
  def windowTime(windowEnd: Expression): Expression = PreciseTimestampConversion(
    Subtract(PreciseTimestampConversion(windowEnd, dataType, LongType), long(1)), LongType, dataType)

  /** The row's own time plus a fixed duration (SESSION's end of a single row: t + gap). */
  def timePlus(micros: Long): Expression = PreciseTimestampConversion(
    Add(PreciseTimestampConversion(time, dataType, LongType), long(micros)), LongType, dataType)
}
