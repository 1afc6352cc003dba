package io.mvengine

import java.time.{ZoneId, ZoneOffset}

import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionInfo}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan

/**
 * The window table functions: their names, arguments in Flink's order, and how to call them.
 *
 * Arguments are bound by position or by name (`SIZE => INTERVAL '1' HOUR`); the first `required`
 * of them must be given. HOP takes its SLIDE before SIZE and CUMULATE its STEP before SIZE, as in Flink.
 */
sealed abstract class WindowKind(val name: String, val arguments: Seq[String], val required: Int,
                                 val usage: String, val description: String) {
  def isSession: Boolean = this == WindowKind.Session || this == WindowKind.EkuiperSession

  /** Whether a row's windows follow from that row alone (TUMBLE, HOP, CUMULATE; not a session,
   *  whose extent its neighbours decide): the delta rules pass a change's rows through it. */
  def isPerRow: Boolean = this == WindowKind.Tumble || this == WindowKind.Hop || this == WindowKind.Cumulate

  /** How SHOW FUNCTIONS and DESCRIBE FUNCTION present it. */
  def registration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) = (
    FunctionIdentifier(name.toLowerCase),
    new ExpressionInfo(classOf[WindowTableFunction].getName, null, name.toLowerCase,
      s"$usage - $description", ""),
    (_: Seq[Expression]) => throw WindowErrors.notRewritten(name))
}

object WindowKind {
  private val Data = Seq("DATA", "TIMECOL")

  case object Tumble extends WindowKind("TUMBLE", Data ++ Seq("SIZE", "OFFSET"), 3,
    "TUMBLE(TABLE(data), DESCRIPTOR(timecol), size [, offset])",
    "Assigns each row to the one fixed-size, non-overlapping window [window_start, window_end) that holds it.")

  case object Hop extends WindowKind("HOP", Data ++ Seq("SLIDE", "SIZE", "OFFSET"), 4,
    "HOP(TABLE(data), DESCRIPTOR(timecol), slide, size [, offset])",
    "Assigns each row to every window of length size, starting every slide, that holds it.")

  case object Cumulate extends WindowKind("CUMULATE", Data ++ Seq("STEP", "SIZE", "OFFSET"), 4,
    "CUMULATE(TABLE(data), DESCRIPTOR(timecol), step, size [, offset])",
    "Assigns each row to the windows [start, start + k * step) of its size-long period that hold it.")

  case object Session extends WindowKind("SESSION", Data ++ Seq("GAP"), 3,
    "SESSION(TABLE(data) [PARTITION BY key, ...], DESCRIPTOR(timecol), gap)",
    "Groups each key's rows into sessions that close after gap without rows.")

  /**
   * eKuiper's SESSIONWINDOW(unit, maxDuration, timeout) over the whole input: the window table
   * function behind [[EkuiperWindows]], not callable by name. SIZE is the maximum duration, GAP the
   * timeout.
   */
  case object EkuiperSession extends WindowKind("SESSIONWINDOW", Data ++ Seq("SIZE", "GAP"), 4,
    "SESSIONWINDOW(unit, maxDuration, timeout) in GROUP BY",
    "Sessions closing after timeout without events, cut at multiples of maxDuration once longer than it.")

  val all: Seq[WindowKind] = Seq(Tumble, Hop, Cumulate, Session)

  def find(nameParts: Seq[String]): Option[WindowKind] = nameParts match {
    case Seq(single) => all.find(_.name.equalsIgnoreCase(single))
    case _ => None
  }
}

/**
 * A validated window: every duration in microseconds, the offset already taken modulo the
 * alignment period (Flink: offsets -16, -6 and +4 minutes are the same for 10-minute windows).
 *
 * `step` is the period windows start on: SIZE for TUMBLE, SLIDE for HOP, STEP for CUMULATE,
 * GAP for SESSION. `timeZone` is set for TIMESTAMP columns, whose windows align on wall-clock
 * time in that zone; TIMESTAMP_NTZ columns align on their own value.
 */
case class WindowSpec(kind: WindowKind, size: Long, step: Long, offset: Long, timeZone: Option[String]) {

  /** Windows per row that HOP and CUMULATE generate before dropping those that miss the row. */
  def windowsPerRow: Long = kind match {
    case WindowKind.Hop => (size + step - 1) / step
    case WindowKind.Cumulate => size / step
    case _ => 1
  }

  /** The fixed offset from UTC of the zone windows align in, or None for a zone with daylight saving. */
  def fixedZoneOffsetMicros: Option[Long] = timeZone match {
    case None => Some(0L)
    case Some(id) => ZoneId.of(id).normalized() match {
      case fixed: ZoneOffset => Some(fixed.getTotalSeconds * 1000000L)
      case _ => None
    }
  }

  /** An upper bound, in absolute time, of any window's length: DST may lengthen a local day. */
  def maxWindowLength: Long = if (fixedZoneOffsetMicros.isDefined) size else size + 2L * 86400000000L

  override def toString: String = {
    val zone = timeZone.map(z => s", zone=$z").getOrElse("")
    s"${kind.name}(size=${size}us, step=${step}us, offset=${offset}us$zone)"
  }
}
