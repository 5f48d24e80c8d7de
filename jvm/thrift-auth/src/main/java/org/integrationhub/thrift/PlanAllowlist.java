package org.integrationhub.thrift;

import java.lang.reflect.Method;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.catalyst.analysis.LocalTempView$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.execution.command.CreateViewCommand;
import org.apache.spark.sql.execution.command.SetCommand;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import scala.Option;

/**
 * Which logical plan nodes a statement on the analysts' server may contain: an allow-list.
 *
 * <p>A statement runs only if every node of its analysed plan, of its subqueries and of the
 * views it reads is one of these: the parts of a query over the catalog's tables, and commands
 * that only read (listings, descriptions, plans, the current schema). Everything else is refused
 * by its name: a script transformation ({@code SELECT TRANSFORM ... USING}), a write, a cache, a
 * command, a relation over files. The names are Spark 4.0's and Delta 4.0's (the pinned
 * versions), compared as strings so that the Delta classes need not be on the compile class
 * path; a node a later Spark adds is refused until it is read and listed here.
 */
final class PlanAllowlist {

  private static final String LOGICAL = "org.apache.spark.sql.catalyst.plans.logical.";
  private static final String ANALYSIS = "org.apache.spark.sql.catalyst.analysis.";
  private static final String COMMAND = "org.apache.spark.sql.execution.command.";
  private static final String DELTA = "org.apache.spark.sql.delta.commands.";

  /** The parts of a query: what a SELECT over tables analyses to. */
  static final Set<String> QUERY_NODES =
      Set.of(
          LOGICAL + "Project",
          LOGICAL + "Filter",
          LOGICAL + "Join",
          LOGICAL + "LateralJoin",
          LOGICAL + "Aggregate",
          LOGICAL + "Window",
          LOGICAL + "Sort",
          LOGICAL + "GlobalLimit",
          LOGICAL + "LocalLimit",
          LOGICAL + "Offset",
          LOGICAL + "Tail",
          LOGICAL + "Union",
          LOGICAL + "Intersect",
          LOGICAL + "Except",
          LOGICAL + "Distinct",
          LOGICAL + "Deduplicate",
          LOGICAL + "SubqueryAlias",
          LOGICAL + "View",
          LOGICAL + "WithCTE",
          LOGICAL + "CTERelationDef",
          LOGICAL + "CTERelationRef",
          LOGICAL + "OneRowRelation",
          LOGICAL + "LocalRelation",
          LOGICAL + "Range",
          LOGICAL + "Generate",
          LOGICAL + "Expand",
          LOGICAL + "Sample",
          LOGICAL + "ResolvedHint",
          LOGICAL + "Repartition",
          LOGICAL + "RepartitionByExpression",
          LOGICAL + "RebalancePartitions",
          // The catalog objects a SHOW or DESCRIBE names, once resolved.
          ANALYSIS + "ResolvedNamespace",
          ANALYSIS + "ResolvedTable",
          ANALYSIS + "ResolvedPersistentView",
          ANALYSIS + "ResolvedTempView",
          ANALYSIS + "ResolvedNonPersistentFunc",
          ANALYSIS + "ResolvedPersistentFunc",
          "org.apache.spark.sql.catalyst.catalog.HiveTableRelation");

  /** Commands that only read: listings, descriptions, plans, and the session's current schema. */
  static final Set<String> READ_ONLY_COMMANDS =
      Set.of(
          // SHOW ...
          LOGICAL + "ShowTables",
          LOGICAL + "ShowTablesExtended",
          LOGICAL + "ShowTablePartition",
          LOGICAL + "ShowNamespaces",
          LOGICAL + "ShowViews",
          LOGICAL + "ShowColumns",
          LOGICAL + "ShowFunctions",
          LOGICAL + "ShowPartitions",
          LOGICAL + "ShowTableProperties",
          LOGICAL + "ShowCreateTable",
          COMMAND + "ShowTablesCommand",
          COMMAND + "ShowViewsCommand",
          COMMAND + "ShowColumnsCommand",
          COMMAND + "ShowFunctionsCommand",
          COMMAND + "ShowPartitionsCommand",
          COMMAND + "ShowTablePropertiesCommand",
          COMMAND + "ShowCreateTableCommand",
          COMMAND + "ShowCreateTableAsSerdeCommand",
          COMMAND + "ShowCatalogsCommand",
          COMMAND + "ShowCurrentNamespaceCommand",
          DELTA + "ShowDeltaTableColumnsCommand",
          // DESCRIBE ...
          LOGICAL + "DescribeRelation",
          LOGICAL + "DescribeColumn",
          LOGICAL + "DescribeNamespace",
          LOGICAL + "DescribeFunction",
          COMMAND + "DescribeTableCommand",
          COMMAND + "DescribeRelationJsonCommand",
          COMMAND + "DescribeColumnCommand",
          COMMAND + "DescribeDatabaseCommand",
          COMMAND + "DescribeFunctionCommand",
          COMMAND + "DescribeQueryCommand",
          DELTA + "DescribeDeltaDetailCommand",
          DELTA + "DescribeDeltaHistory",
          DELTA + "DescribeDeltaHistoryCommand",
          // EXPLAIN plans a statement without running it.
          COMMAND + "ExplainCommand",
          // USE: the session's current catalog and schema.
          LOGICAL + "SetCatalogAndNamespace",
          COMMAND + "SetCatalogCommand",
          COMMAND + "SetNamespaceCommand");

  /** The statements behind plans whose names do not say it. */
  private static final Map<String, String> STATEMENTS =
      Map.of(
          "AppendData", "INSERT INTO",
          "OverwriteByExpression", "INSERT OVERWRITE",
          "OverwritePartitionsDynamic", "INSERT OVERWRITE",
          "DeleteCommand", "DELETE FROM",
          "SetTableProperties", "ALTER TABLE SET TBLPROPERTIES",
          "ScriptTransformation", "a script transformation (SELECT TRANSFORM ... USING)",
          "InsertIntoDir", "INSERT OVERWRITE DIRECTORY");

  private PlanAllowlist() {}

  /** What `node` itself is when it is refused, or null when it may run. */
  static String refusal(LogicalPlan node) {
    String name = node.getClass().getName();
    if (QUERY_NODES.contains(name) || READ_ONLY_COMMANDS.contains(name)) {
      return null;
    }
    if (node instanceof LogicalRelation relation) {
      return relation.catalogTable().isDefined() ? null : "a relation over files (by path)";
    }
    if (node instanceof DataSourceV2Relation relation) {
      return isCatalogTable(relation.table()) ? null : "a relation over files (by path)";
    }
    if (node instanceof SetCommand set) {
      // `SET`, `SET -v` and `SET key` read; `SET key=value` changes the session.
      boolean changes = set.kv().isDefined() && set.kv().get()._2().isDefined();
      return changes ? "SET of a value (" + set.kv().get()._1() + ")" : null;
    }
    if (node instanceof CreateViewCommand view
        && LocalTempView$.MODULE$.equals(view.viewType())) {
      // A temporary view lives in one session and holds no data; its query is checked as well
      // (ReadOnlySql), so it cannot hide what a statement may not run.
      return null;
    }
    return statementKind(node);
  }

  /**
   * Whether a v2 relation reads a table of the catalog, not a path.
   *
   * <p>Delta resolves {@code delta.`/some/path`} to a {@code DeltaTableV2} without a catalog
   * table; the server runs with {@code spark.sql.runSQLOnFiles=false}, which Delta honours, and
   * this check holds even if that setting were ever changed.
   */
  private static boolean isCatalogTable(Table table) {
    String kind = table.getClass().getName();
    if (kind.equals("org.apache.spark.sql.connector.catalog.V1Table")) {
      return true;
    }
    if (kind.equals("org.apache.spark.sql.delta.catalog.DeltaTableV2")) {
      try {
        Method catalogTable = table.getClass().getMethod("catalogTable");
        return ((Option<?>) catalogTable.invoke(table)).isDefined();
      } catch (ReflectiveOperationException e) {
        return false;
      }
    }
    return false;
  }

  /**
   * A readable name of a refused node, from its class: {@code DropTableCommand} is "DROP TABLE
   * (DropTableCommand)"; the class name stays, for whoever searches the Spark sources.
   */
  static String statementKind(LogicalPlan node) {
    String name = node.getClass().getSimpleName();
    String words = STATEMENTS.get(name);
    if (words == null) {
      words =
          name.replaceAll("(Command|Exec)$", "")
              .replaceAll("([a-z])([A-Z])", "$1 $2")
              .toUpperCase(Locale.ROOT);
    }
    return words + " (" + name + ")";
  }
}
