package org.integrationhub.thrift;

import org.apache.spark.QueryContext;
import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.analysis.LocalTempView$;
import org.apache.spark.sql.catalyst.expressions.CallMethodViaReflection;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.TryReflect;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.InsertIntoDir;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.ScriptTransformation;
import org.apache.spark.sql.execution.command.CreateViewCommand;
import org.apache.spark.sql.execution.command.SetCommand;
import scala.Function1;
import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.Map$;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * A second line of defence on the analysts' server: no plan of its session writes or escapes.
 *
 * <p>The first line is {@link StatementAllowlist}, which checks each statement a client sends
 * against allow-lists of plan nodes and functions before it runs. This extension (enabled by
 * {@code spark.sql.extensions} in the Thrift server's session only, {@code
 * spark_loaders/services/analyst.py}) injects a check rule that runs on every plan the session
 * analyses, including the ones Spark and Delta build for themselves (reading a table's log,
 * collecting a result), which is why it cannot be an allow-list of every node: it refuses every
 * command outside {@link PlanAllowlist#READ_ONLY_COMMANDS}, a script transformation, a write to a
 * directory, and the reflection functions, wherever they come from.
 *
 * <p>Refused on purpose, though they look harmless: {@code CACHE TABLE} (the cache is shared by
 * every session of the server, so one team's cached copy would answer other teams with stale rows),
 * and {@code SET key=value} (a setting such as {@code spark.sql.variable.substitute} would let a
 * statement read the server's environment).
 */
public final class ReadOnlySql extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {

  /** Spark builds the extension by reflection, with no arguments. */
  public ReadOnlySql() {}

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectCheckRule(
        new AbstractFunction1<SparkSession, Function1<LogicalPlan, BoxedUnit>>() {
          @Override
          public Function1<LogicalPlan, BoxedUnit> apply(SparkSession session) {
            return new AbstractFunction1<LogicalPlan, BoxedUnit>() {
              @Override
              public BoxedUnit apply(LogicalPlan plan) {
                check(plan);
                return BoxedUnit.UNIT;
              }
            };
          }
        });
    return BoxedUnit.UNIT;
  }

  /** Throws unless `plan`, its subqueries and their expressions only read. */
  static void check(LogicalPlan plan) {
    String refused = refusal(plan);
    if (refused != null) {
      throw unchecked(readOnly(refused));
    }
    for (Expression expression : CollectionConverters.asJava(plan.expressions())) {
      checkExpression(expression);
    }
    for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
      check(child);
    }
    for (LogicalPlan subquery : CollectionConverters.asJava(plan.subqueries())) {
      check(subquery);
    }
  }

  /** What kind of statement `node` is when it is refused, or null when it only reads. */
  private static String refusal(LogicalPlan node) {
    if (node instanceof SetCommand set) {
      return changesASetting(set) ? "SET of a value (" + set.kv().get()._1() + ")" : null;
    }
    if (node instanceof CreateViewCommand view) {
      // A temporary view lives in one session (one connection) and holds no data.
      return LocalTempView$.MODULE$.equals(view.viewType()) ? null : PlanAllowlist.statementKind(node);
    }
    if (node instanceof ScriptTransformation || node instanceof InsertIntoDir) {
      return PlanAllowlist.statementKind(node);
    }
    if (node instanceof Command && !PlanAllowlist.READ_ONLY_COMMANDS.contains(node.getClass().getName())) {
      return PlanAllowlist.statementKind(node);
    }
    return null;
  }

  /** `SET`, `SET -v` and `SET key` read; `SET key=value` changes the session. */
  private static boolean changesASetting(SetCommand set) {
    Option<Tuple2<String, Option<String>>> keyValue = set.kv();
    return keyValue.isDefined() && keyValue.get()._2().isDefined();
  }

  private static void checkExpression(Expression expression) {
    if (expression instanceof CallMethodViaReflection || expression instanceof TryReflect) {
      throw unchecked(readOnly("the functions reflect and java_method"));
    }
    for (Expression child : CollectionConverters.asJava(expression.children())) {
      checkExpression(child);
    }
  }

  /**
   * Throws `error` from a Scala function, which declares no checked exceptions.
   *
   * <p>{@code AnalysisException} is a checked exception to Java but not to Scala, where Spark
   * throws it from its own check rules; the Thrift server reports it as it reports Spark's own
   * analysis errors. Only the compiler's view changes here: the JVM has no checked exceptions.
   */
  @SuppressWarnings("unchecked")
  private static <E extends Exception> RuntimeException unchecked(Exception error) throws E {
    throw (E) error;
  }

  private static AnalysisException readOnly(String what) {
    String message =
        "The analysts' server is read-only: it refuses "
            + what
            + ". It runs queries (SELECT), SHOW, DESCRIBE, EXPLAIN, USE, SET to read a setting,"
            + " and CREATE TEMPORARY VIEW. Tables change only through the hub's loader.";
    return new AnalysisException(
        message,
        Option.empty(),
        Option.empty(),
        Option.empty(),
        Option.empty(),
        Map$.MODULE$.empty(),
        new QueryContext[0]);
  }
}
