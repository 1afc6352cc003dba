package io.mvengine

import java.lang.reflect.{Constructor, InvocationTargetException}
import java.nio.charset.StandardCharsets

import org.apache.spark.{QueryContext, SPARK_VERSION}
import org.apache.spark.sql.AnalysisException
import org.apache.spark.sql.catalyst.expressions.EvalMode
import org.apache.spark.sql.catalyst.expressions.aggregate.Sum

/**
 * What differs between the Spark versions the extension supports (4.0, 4.1 and 4.2, each with its
 * Delta 4.4 jar): which line this jar was built for (a session of another line is refused), and
 * the few Spark APIs whose shape differs. Everything else compiles unchanged against all three;
 * what differs is reached here by reflection, so one source tree builds for every version.
 *
 *  - `AnalysisException(message, line, startPosition, cause, errorClass, messageParameters, context)`
 *    is `protected` in Spark 4.0 and public from 4.1 on. The constructor itself is the same
 *    (public in the bytecode) in all three, so it is called reflectively.
 *  - `Sum`'s evaluation mode: `Sum(child, evalMode: EvalMode.Value)` in 4.0, and
 *    `Sum(child, evalContext: NumericEvalContext)` with `evalContext.evalMode` from 4.1 on.
 */
private[mvengine] object SparkCompat {

  /** The Spark line (4.0, 4.1, 4.2) this jar was compiled for, which mv/jars.py stamps into it. */
  lazy val builtLine: Option[String] = Option(getClass.getResourceAsStream("/io/mvengine/spark-line.txt"))
    .map(stream => try new String(stream.readAllBytes(), StandardCharsets.UTF_8).trim finally stream.close())

  /** Fails with MV_SPARK_VERSION_UNSUPPORTED when `built` is not the running Spark's line: Catalyst
   *  differs between lines, so a jar built for another would fail later with a NoSuchMethodError. */
  def requireLine(built: Option[String]): Unit = {
    val running = SPARK_VERSION.split('.').take(2).mkString(".")
    built.filter(_ != running).foreach(line => throw WindowErrors.sparkLineMismatch(SPARK_VERSION, line))
  }

  private lazy val analysisExceptionConstructor: Constructor[AnalysisException] =
    classOf[AnalysisException].getConstructor(classOf[String], classOf[Option[_]], classOf[Option[_]],
      classOf[Option[_]], classOf[Option[_]], classOf[Map[_, _]], classOf[Array[QueryContext]])

  /** An AnalysisException with exactly this message, error class and parameters, and no position. */
  def analysisException(message: String, errorClass: String, params: Map[String, String]): AnalysisException =
    try {
      analysisExceptionConstructor.newInstance(message, None, None, None, Some(errorClass), params,
        Array.empty[QueryContext])
    } catch {
      case e: InvocationTargetException => throw e.getCause
    }

  /** The evaluation mode (LEGACY, ANSI or TRY) of a `sum`. */
  def evalMode(sum: Sum): EvalMode.Value = {
    val method = sumEvalMode
    val value = method._1.invoke(sum)
    (if (method._2) value.getClass.getMethod("evalMode").invoke(value) else value).asInstanceOf[EvalMode.Value]
  }

  /** `evalContext` (then its `evalMode`) from Spark 4.1 on, `evalMode` in 4.0. */
  private lazy val sumEvalMode: (java.lang.reflect.Method, Boolean) =
    try (classOf[Sum].getMethod("evalContext"), true)
    catch { case _: NoSuchMethodException => (classOf[Sum].getMethod("evalMode"), false) }
}
