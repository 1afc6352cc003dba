package io.mvengine

import org.apache.spark.sql.catalyst.expressions.{Add, Cast, Expression, IntegralDivide, Literal, Multiply, Pmod, PreciseTimestampConversion, Subtract}
import org.apache.spark.sql.types.{DataType, LongType, TimestampNTZType, TimestampType}

/**
 * Window bounds as Spark's own expressions (whole-stage code generation, no UDFs).
 *
 * Bounds are computed on an "aligned clock" in microseconds: the value itself for TIMESTAMP_NTZ,
 * wall-clock time in the session time zone for TIMESTAMP and for BIGINT epoch milliseconds (an
 * instant, like eKuiper's `ts BIGINT`), so a one-day window runs from local midnight to local
 * midnight, as in Flink's TIMESTAMP_LTZ. Zones with a fixed offset, UTC among them, need only a
 * shift; zones with daylight saving go through Spark's zone conversion.
 *
 * start(t) = t - floorMod(t - offset, step), docs/design.md rule 2.
 */
class WindowBounds(spec: WindowSpec, time: Expression) {
  private val dataType: DataType = time.dataType

  private def long(value: Long): Expression = Literal(value, LongType)

  /** A value of the time column's type as microseconds since the epoch (its own value for NTZ). */
  private def toMicros(value: Expression): Expression = dataType match {
    case LongType => Multiply(value, long(1000))
    case other => PreciseTimestampConversion(value, other, LongType)
  }

  /** Microseconds since the epoch as a value of the time column's type (whole milliseconds for BIGINT). */
  private def fromMicros(micros: Expression): Expression = dataType match {
    case LongType => IntegralDivide(micros, long(1000))
    case other => PreciseTimestampConversion(micros, LongType, other)
  }

  private val zoned: Boolean = dataType != TimestampNTZType

  /** The row's time on the aligned clock. */
  val aligned: Expression = (zoned, spec.fixedZoneOffsetMicros) match {
    case (false, _) | (true, Some(0L)) => toMicros(time)
    case (true, Some(shift)) => Add(toMicros(time), long(shift))
    case (true, None) => PreciseTimestampConversion(Cast(PreciseTimestampConversion(toMicros(time), LongType,
      TimestampType), TimestampNTZType, spec.timeZone), TimestampNTZType, LongType)
  }

  /** A point on the aligned clock as a value of the time column's type. */
  def toTime(alignedMicros: Expression): Expression = fromMicros((zoned, spec.fixedZoneOffsetMicros) match {
    case (false, _) | (true, Some(0L)) => alignedMicros
    case (true, Some(shift)) => Subtract(alignedMicros, long(shift))
    case (true, None) => PreciseTimestampConversion(Cast(PreciseTimestampConversion(alignedMicros, LongType,
      TimestampNTZType), TimestampType, spec.timeZone), TimestampType, LongType)
  })

  /** start(t) on the aligned clock for windows starting every `period` microseconds. */
  def alignedStart(period: Long, offset: Long): Expression =
    Subtract(aligned, Pmod(Subtract(aligned, long(offset)), long(period)))

  def plus(alignedMicros: Expression, micros: Long): Expression =
    if (micros == 0) alignedMicros else Add(alignedMicros, long(micros))

  /**
   * window_time: one unit before window_end, the time column's smallest step: a microsecond for
   * timestamps (Spark's window_time convention), a millisecond for BIGINT epoch milliseconds.
   */
  def windowTime(windowEnd: Expression): Expression = dataType match {
    case LongType => Subtract(windowEnd, long(1))
    case _ => fromMicros(Subtract(toMicros(windowEnd), long(1)))
  }

  /** The row's own time plus a fixed duration (SESSION's end of a single row: t + gap). */
  def timePlus(micros: Long): Expression = fromMicros(Add(toMicros(time), long(micros)))
}
