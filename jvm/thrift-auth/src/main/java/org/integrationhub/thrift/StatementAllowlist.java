package org.integrationhub.thrift;

import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.QueryPlanningTracker;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.command.CreateViewCommand;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Decides whether a statement a client sent may run on the analysts' server: allow-lists only.
 *
 * <p>The Thrift service ({@link AnalystThriftServer}) hands every statement here before it runs.
 * The statement is parsed and analysed in the client's own session (its current schema, its
 * temporary views), exactly as Spark will when it runs it, and runs only if every node of the
 * analysed plan, of its subqueries, of the views it reads and of the query of a temporary view it
 * creates is allowed by {@link PlanAllowlist}, and every expression by {@link FunctionAllowlist}.
 * Everything else is refused with a message that names the construct.
 *
 * <p>Why here and not in a check rule of the session: a check rule sees every plan the session
 * analyses, including those Spark and Delta build for themselves while answering (reading a
 * table's log by path, collecting a result into objects). Those are not the client's and would
 * need their own exceptions; checking the client's statement itself needs none, and a statement
 * that reaches Spark without passing here does not exist. The price is a second analysis of each
 * statement (docs/security.md gives the measured cost).
 *
 * <p>A statement that is allowed then reads only the tables its login may ({@link
 * TableReadPolicy}).
 */
public final class StatementAllowlist {

  /** Loaded once per JVM: the registry lookups behind it take milliseconds. */
  private static final FunctionAllowlist FUNCTIONS = FunctionAllowlist.load();

  private StatementAllowlist() {}

  /** Why `statement` may not run in `session`, or null when it may; read grants not checked. */
  public static String refusal(SparkSession session, String statement) {
    return refusal(session, statement, null);
  }

  /**
   * Why `statement` may not run in `session` for `login`, or null when it may.
   *
   * <p>A statement that does not parse or analyse is refused with Spark's own error, which names
   * the table or the syntax at fault: what cannot be checked does not run.
   */
  static String refusal(SparkSession session, String statement, Login login) {
    LogicalPlan analysed;
    // As Spark's statement threads do: Delta and the other jars of `spark.jars` are found
    // through the session's jar class loader, not the Thrift worker thread's own.
    Thread thread = Thread.currentThread();
    ClassLoader before = thread.getContextClassLoader();
    thread.setContextClassLoader(session.sharedState().jarClassLoader());
    try {
      LogicalPlan parsed = session.sessionState().sqlParser().parsePlan(statement);
      analysed =
          session
              .sessionState()
              .analyzer()
              .executeAndCheck(parsed, new QueryPlanningTracker(Option.empty()));
      String refused = refusal(analysed);
      // The catalog loads a table's properties through the same class loader.
      return refused != null ? refused : TableReadPolicy.refusal(session, login, analysed);
    } catch (AnalysisException e) {
      // Without the plan, which Spark appends to the message and which names storage paths.
      return e.getSimpleMessage();
    } catch (Exception | LinkageError e) {
      // ParseException is checked to Java, not to Scala, which throws it here.
      return e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    } finally {
      thread.setContextClassLoader(before);
    }
  }

  /** Why `plan` may not run, or null when every part of it is allowed. */
  static String refusal(LogicalPlan plan) {
    String refused = PlanAllowlist.refusal(plan);
    if (refused != null) {
      return message(refused);
    }
    for (Expression expression : CollectionConverters.asJava(plan.expressions())) {
      refused = refusal(expression);
      if (refused != null) {
        return refused;
      }
    }
    for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
      refused = refusal(child);
      if (refused != null) {
        return refused;
      }
    }
    for (LogicalPlan subquery : CollectionConverters.asJava(plan.subqueries())) {
      refused = refusal(subquery);
      if (refused != null) {
        return refused;
      }
    }
    if (plan instanceof CreateViewCommand view) {
      // Analysed, the command keeps its query outside its children.
      return refusal(view.plan());
    }
    return null;
  }

  private static String refusal(Expression expression) {
    if (!FUNCTIONS.allows(expression)) {
      return message(FUNCTIONS.describe(expression));
    }
    for (Expression child : CollectionConverters.asJava(expression.children())) {
      String refused = refusal(child);
      if (refused != null) {
        return refused;
      }
    }
    return null;
  }

  private static String message(String what) {
    return "The analysts' server is read-only and runs only allowed SQL: it refuses "
        + what
        + ". It runs queries (SELECT) over the catalog's tables with Spark's data functions,"
        + " SHOW, DESCRIBE, EXPLAIN, USE, SET to read a setting, and CREATE TEMPORARY VIEW;"
        + " docs/security.md lists what is allowed and how to extend it. Tables change only"
        + " through the hub's loader.";
  }
}
