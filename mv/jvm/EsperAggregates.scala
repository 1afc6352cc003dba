package io.mvengine

import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions._
import org.apache.spark.sql.catalyst.expressions.aggregate._
import org.apache.spark.sql.types.{DoubleType, NumericType}

/**
 * Esper's derived-value windows as Spark SQL aggregate functions, each returning a struct with
 * Esper's field names, built from Spark's own aggregates (no UDAF):
 * {{{
 *   -- Esper: select stddev from StockTick#length(10)#uni(price)
 *   SELECT window_seq, STAT_UNI(price).stddev FROM WIN_LENGTH(TABLE(ticks), DESCRIPTOR(ts), 10)
 *   GROUP BY window_seq
 * }}}
 *  - STD_SIZE() - size: the row count;
 *  - STAT_UNI(x) - datapoints, total, average, variance, stddev, stddevpa;
 *  - STAT_LINEST(x, y) - slope, YIntercept, XAverage, XStandardDeviationPop, XStandardDeviationSample,
 *    XSum, XVariance, YAverage, YStandardDeviationPop, YStandardDeviationSample, YSum, YVariance,
 *    dataPoints, n, sumX, sumXSq, sumXY, sumY, sumYSq (the regression of y on x);
 *  - STAT_CORREL(x, y) - correlation;
 *  - STAT_WEIGHTED_AVG(x, weight) - average.
 * Variances and standard deviations named without "Pop"/"pa" are the sample ones (n - 1), as in
 * Esper. Where Esper answers NaN (too few points, zero weight) these answer NULL, SQL's convention;
 * sums of no values are 0, as in Esper. Two-value statistics use only rows where both are non-NULL.
 */
object EsperAggregates {

  type Builder = (FunctionIdentifier, ExpressionInfo, Seq[Expression] => Expression)

  val all: Seq[Builder] = Seq(
    function("std_size", "STD_SIZE()", Nil, _ => fields("size" -> agg(Count(Literal(1))))),
    function("stat_uni", "STAT_UNI(x)", Seq("x"), { case Seq(x) => uni(x) }),
    function("stat_linest", "STAT_LINEST(x, y)", Seq("x", "y"), { case Seq(x, y) => linest(x, y) }),
    function("stat_correl", "STAT_CORREL(x, y)", Seq("x", "y"),
      { case Seq(x, y) => fields("correlation" -> agg(Corr(x, y))) }),
    function("stat_weighted_avg", "STAT_WEIGHTED_AVG(x, weight)", Seq("x", "weight"),
      { case Seq(x, w) => weightedAverage(x, w) }))

  private def uni(x: Expression): Expression = fields(
    "datapoints" -> agg(Count(x)), "total" -> total(x), "average" -> agg(Average(x)),
    "variance" -> agg(VarianceSamp(x)), "stddev" -> agg(StddevSamp(x)), "stddevpa" -> agg(StddevPop(x)))

  private def linest(x: Expression, y: Expression): Expression = fields(
    "slope" -> agg(RegrSlope(y, x)), "YIntercept" -> agg(RegrIntercept(y, x)),
    "XAverage" -> agg(Average(x)), "XStandardDeviationPop" -> agg(StddevPop(x)),
    "XStandardDeviationSample" -> agg(StddevSamp(x)), "XSum" -> total(x), "XVariance" -> agg(VarianceSamp(x)),
    "YAverage" -> agg(Average(y)), "YStandardDeviationPop" -> agg(StddevPop(y)),
    "YStandardDeviationSample" -> agg(StddevSamp(y)), "YSum" -> total(y), "YVariance" -> agg(VarianceSamp(y)),
    "dataPoints" -> agg(Count(x)), "n" -> agg(Count(x)), "sumX" -> total(x),
    "sumXSq" -> total(Multiply(x, x)), "sumXY" -> total(Multiply(x, y)), "sumY" -> total(y),
    "sumYSq" -> total(Multiply(y, y)))

  private def weightedAverage(x: Expression, w: Expression): Expression = {
    val weights = total(w)
    fields("average" -> If(EqualTo(weights, Literal(0.0)), Literal(null, DoubleType),
      Divide(total(Multiply(x, w)), weights)))
  }

  /** A builder that checks the argument count and types, casts to DOUBLE and pairs NULLs. */
  private def function(name: String, usage: String, argNames: Seq[String],
                       build: Seq[Expression] => Expression): Builder = {
    val builder = (args: Seq[Expression]) => {
      if (args.size != argNames.size) throw WindowErrors.aggregateArguments(name.toUpperCase, usage, args.size)
      args.zip(argNames).foreach { case (arg, argName) =>
        if (arg.resolved && !arg.dataType.isInstanceOf[NumericType]) {
          throw WindowErrors.aggregateNotNumeric(name.toUpperCase, s"$argName (${arg.sql})", arg.dataType.sql)
        }
      }
      build(pairNulls(args.map(Cast(_, DoubleType))))
    }
    (FunctionIdentifier(name), new ExpressionInfo(getClass.getName, null, name,
      s"$usage - Esper's ${name.stripPrefix("std_").stripPrefix("stat_")} derived-value window as an aggregate.",
      ""), builder)
  }

  /** With two values, each is NULL where the other is, so both statistics see the same rows. */
  private def pairNulls(values: Seq[Expression]): Seq[Expression] = values match {
    case Seq(x, y) => Seq(If(IsNull(y), Literal(null, DoubleType), x), If(IsNull(x), Literal(null, DoubleType), y))
    case other => other
  }

  private def agg(f: AggregateFunction): Expression = f.toAggregateExpression()
  private def total(x: Expression): Expression = Coalesce(Seq(agg(Sum(x)), Literal(0.0)))
  private def fields(named: (String, Expression)*): Expression =
    CreateNamedStruct(named.flatMap { case (name, value) => Seq(Literal(name), value) })
}
