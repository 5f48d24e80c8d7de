package org.integrationhub.thrift;

import java.util.Set;
import org.apache.spark.QueryContext;
import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.analysis.LocalTempView$;
import org.apache.spark.sql.catalyst.expressions.CallMethodViaReflection;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
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
 * Makes a Spark session read-only: the analysts' Thrift server runs queries, never changes.
 *
 * <p>Enabled by {@code spark.sql.extensions} in the Thrift server's session only ({@code
 * spark_loaders/analyst.py}); the loader, {@code hub sql} and {@code hub load} keep writing. It
 * injects a check rule that runs on every analyzed plan, after Delta's rules have turned {@code
 * DELETE}, {@code MERGE}, {@code OPTIMIZE}, ... into their commands, and before anything runs.
 *
 * <p>Why an allow-list of commands rather than a list of writes: Spark and Delta add new write
 * commands with most releases ({@code AppendData}, {@code DeleteCommand}, {@code
 * RestoreTableCommand}, ...), and a deny-list would let each new one through. Every node that is
 * a {@link Command} must be one of {@link #READ_ONLY_COMMANDS}; every other node is part of a
 * query. The names are those of Spark 4.0 and Delta 4.0 (the pinned versions), compared as
 * strings so that the Delta classes need not be on the compile class path.
 *
 * <p>Refused on purpose, though they look harmless: {@code CACHE TABLE} (the cache is shared by
 * every session of the server, so one team's cached copy would answer other teams with stale rows),
 * {@code SET key=value} except to read a value (a setting such as {@code
 * spark.sql.variable.substitute} would let a statement read the server's environment), and the
 * {@code reflect}/{@code java_method} functions, which call static Java methods inside the server
 * (for example {@code System.setProperty}, which could repoint the key check).
 */
public final class ReadOnlySql extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {

  /** Commands that only read: listings, descriptions, plans, and the session's current schema. */
  static final Set<String> READ_ONLY_COMMANDS =
      Set.of(
          // SHOW ...
          "org.apache.spark.sql.catalyst.plans.logical.ShowTables",
          "org.apache.spark.sql.catalyst.plans.logical.ShowTablesExtended",
          "org.apache.spark.sql.catalyst.plans.logical.ShowTablePartition",
          "org.apache.spark.sql.catalyst.plans.logical.ShowNamespaces",
          "org.apache.spark.sql.catalyst.plans.logical.ShowViews",
          "org.apache.spark.sql.catalyst.plans.logical.ShowColumns",
          "org.apache.spark.sql.catalyst.plans.logical.ShowFunctions",
          "org.apache.spark.sql.catalyst.plans.logical.ShowPartitions",
          "org.apache.spark.sql.catalyst.plans.logical.ShowTableProperties",
          "org.apache.spark.sql.catalyst.plans.logical.ShowCreateTable",
          "org.apache.spark.sql.execution.command.ShowTablesCommand",
          "org.apache.spark.sql.execution.command.ShowViewsCommand",
          "org.apache.spark.sql.execution.command.ShowColumnsCommand",
          "org.apache.spark.sql.execution.command.ShowFunctionsCommand",
          "org.apache.spark.sql.execution.command.ShowPartitionsCommand",
          "org.apache.spark.sql.execution.command.ShowTablePropertiesCommand",
          "org.apache.spark.sql.execution.command.ShowCreateTableCommand",
          "org.apache.spark.sql.execution.command.ShowCreateTableAsSerdeCommand",
          "org.apache.spark.sql.execution.command.ShowCatalogsCommand",
          "org.apache.spark.sql.execution.command.ShowCurrentNamespaceCommand",
          "org.apache.spark.sql.delta.commands.ShowDeltaTableColumnsCommand",
          // DESCRIBE ...
          "org.apache.spark.sql.catalyst.plans.logical.DescribeRelation",
          "org.apache.spark.sql.catalyst.plans.logical.DescribeColumn",
          "org.apache.spark.sql.catalyst.plans.logical.DescribeNamespace",
          "org.apache.spark.sql.catalyst.plans.logical.DescribeFunction",
          "org.apache.spark.sql.execution.command.DescribeTableCommand",
          "org.apache.spark.sql.execution.command.DescribeRelationJsonCommand",
          "org.apache.spark.sql.execution.command.DescribeColumnCommand",
          "org.apache.spark.sql.execution.command.DescribeDatabaseCommand",
          "org.apache.spark.sql.execution.command.DescribeFunctionCommand",
          "org.apache.spark.sql.execution.command.DescribeQueryCommand",
          "org.apache.spark.sql.delta.commands.DescribeDeltaDetailCommand",
          "org.apache.spark.sql.delta.commands.DescribeDeltaHistory",
          "org.apache.spark.sql.delta.commands.DescribeDeltaHistoryCommand",
          // EXPLAIN plans a statement without running it.
          "org.apache.spark.sql.execution.command.ExplainCommand",
          // USE: the session's current catalog and schema.
          "org.apache.spark.sql.catalyst.plans.logical.SetCatalogAndNamespace",
          "org.apache.spark.sql.execution.command.SetCatalogCommand",
          "org.apache.spark.sql.execution.command.SetNamespaceCommand");

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
      return LocalTempView$.MODULE$.equals(view.viewType()) ? null : statementKind(node);
    }
    if (node instanceof Command && !READ_ONLY_COMMANDS.contains(node.getClass().getName())) {
      return statementKind(node);
    }
    return null;
  }

  /** `SET`, `SET -v` and `SET key` read; `SET key=value` changes the session. */
  private static boolean changesASetting(SetCommand set) {
    Option<Tuple2<String, Option<String>>> keyValue = set.kv();
    return keyValue.isDefined() && keyValue.get()._2().isDefined();
  }

  private static void checkExpression(Expression expression) {
    if (expression instanceof CallMethodViaReflection) {
      throw unchecked(readOnly("the functions reflect and java_method"));
    }
    for (Expression child : CollectionConverters.asJava(expression.children())) {
      checkExpression(child);
    }
  }

  /**
   * A readable name of a refused command, from its class: {@code DropTableCommand} is "DROP
   * TABLE (DropTableCommand)"; the class name stays, for whoever searches the Spark sources.
   */
  static String statementKind(LogicalPlan node) {
    String name = node.getClass().getSimpleName();
    String words = STATEMENTS.get(name);
    if (words == null) {
      words = name.replaceAll("(Command|Exec)$", "").replaceAll("([a-z])([A-Z])", "$1 $2");
    }
    return words.toUpperCase(java.util.Locale.ROOT) + " (" + name + ")";
  }

  /** The statements behind plans whose names do not say it. */
  private static final java.util.Map<String, String> STATEMENTS =
      java.util.Map.of(
          "AppendData", "INSERT INTO",
          "OverwriteByExpression", "INSERT OVERWRITE",
          "OverwritePartitionsDynamic", "INSERT OVERWRITE",
          "DeleteCommand", "DELETE FROM",
          "SetTableProperties", "ALTER TABLE SET TBLPROPERTIES");

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
