package org.integrationhub.thrift;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry;
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Which expressions a statement on the analysts' server may contain: an allow-list.
 *
 * <p>Functions are allowed by name, from {@code allowed-functions.txt} beside this class. Each
 * name is looked up in Spark's built-in registry once, at start, and its expression class joins
 * the allowed classes; every other expression class is refused. The rest of {@link #STRUCTURAL}
 * is what the SQL syntax itself builds (columns, literals, aliases, {@code CASE}, subqueries,
 * window specifications, ...), which no function name stands for.
 *
 * <p>Why classes and not names: the analysed plan holds expressions, not the names a statement
 * used ({@code reflect} and {@code java_method} are one class), and a name can be shadowed by a
 * temporary function, which the server refuses to create anyway. Some built-in functions are
 * builders that produce a different class ({@code explode} builds {@code Explode}); those classes
 * are listed in {@link #BUILT} next to the name that builds them.
 */
final class FunctionAllowlist {

  private static final String RESOURCE = "allowed-functions.txt";
  private static final String EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions.";

  /** Expressions the syntax builds, which no function name stands for. */
  static final Set<String> STRUCTURAL =
      Set.of(
          "AttributeReference",
          "Alias",
          "Literal",
          "UpCast",
          "SortOrder",
          "CaseWhen",
          "InSet",
          "InSubquery",
          "ListQuery",
          "ScalarSubquery",
          "Exists",
          "LateralSubquery",
          "OuterReference",
          "LambdaFunction",
          "NamedLambdaVariable",
          "GetStructField",
          "GetArrayStructFields",
          "GetArrayItem",
          "GetMapValue",
          "KnownNotNull",
          "KnownNullable",
          "WindowExpression",
          "WindowSpecDefinition",
          "SpecifiedWindowFrame",
          "UnspecifiedFrame$",
          "UnboundedPreceding$",
          "UnboundedFollowing$",
          "CurrentRow$",
          "GroupingSets",
          "Cube",
          "Rollup",
          "aggregate.AggregateExpression",
          "LikeAny",
          "LikeAll",
          "NotLikeAny",
          "NotLikeAll",
          "TimeAdd",
          "DateAddInterval",
          "DatetimeSub",
          "SubtractTimestamps",
          "SubtractDates",
          "DateAddYMInterval",
          "TimestampAddYMInterval",
          "MultiplyInterval",
          "DivideInterval",
          "CheckOverflow",
          "TryEval",
          // BETWEEN and NULLIF evaluate their first argument once, through a common expression.
          "With",
          "CommonExpressionDef",
          "CommonExpressionRef",
          // PIVOT's aggregate.
          "aggregate.PivotFirst");

  /**
   * Classes that the builders among the allowed names produce, by name. Spark registers these
   * names with a builder class rather than the expression class the plan will hold.
   */
  static final Map<String, Set<String>> BUILT =
      Map.ofEntries(
          Map.entry("count_min_sketch", Set.of("aggregate.CountMinSketchAgg")),
          Map.entry("mode", Set.of("aggregate.Mode")),
          Map.entry("percentile_cont", Set.of("aggregate.PercentileCont")),
          Map.entry("percentile_disc", Set.of("aggregate.PercentileDisc")),
          Map.entry("try_avg", Set.of("aggregate.Average")),
          Map.entry("try_sum", Set.of("aggregate.Sum")),
          Map.entry("curdate", Set.of("CurrentDate")),
          Map.entry("date_part", Set.of("DatePart", "Extract")),
          Map.entry("datepart", Set.of("DatePart", "Extract")),
          Map.entry("make_timestamp_ltz", Set.of("MakeTimestamp")),
          Map.entry("make_timestamp_ntz", Set.of("MakeTimestamp")),
          Map.entry("try_make_timestamp_ltz", Set.of("MakeTimestamp")),
          Map.entry("try_make_timestamp_ntz", Set.of("MakeTimestamp")),
          Map.entry("to_timestamp_ltz", Set.of("ParseToTimestamp")),
          Map.entry("to_timestamp_ntz", Set.of("ParseToTimestamp")),
          Map.entry("try_to_timestamp", Set.of("ParseToTimestamp")),
          Map.entry("explode", Set.of("Explode")),
          Map.entry("explode_outer", Set.of("Explode", "GeneratorOuter")),
          Map.entry("inline", Set.of("Inline")),
          Map.entry("inline_outer", Set.of("Inline", "GeneratorOuter")),
          Map.entry("posexplode", Set.of("PosExplode")),
          Map.entry("posexplode_outer", Set.of("PosExplode", "GeneratorOuter")),
          Map.entry("ceil", Set.of("Ceil")),
          Map.entry("ceiling", Set.of("Ceil")),
          Map.entry("floor", Set.of("Floor")),
          Map.entry("raise_error", Set.of("RaiseError")),
          Map.entry("collate", Set.of("Collate")),
          Map.entry("contains", Set.of("Contains")),
          Map.entry("endswith", Set.of("EndsWith")),
          Map.entry("startswith", Set.of("StartsWith")),
          Map.entry("lpad", Set.of("StringLPad")),
          Map.entry("rpad", Set.of("StringRPad")),
          Map.entry("mask", Set.of("Mask")),
          Map.entry("to_char", Set.of("ToCharacter")),
          Map.entry("to_varchar", Set.of("ToCharacter")),
          Map.entry("parse_json", Set.of("variant.ParseJson")),
          Map.entry("try_parse_json", Set.of("variant.ParseJson")),
          Map.entry("variant_get", Set.of("variant.VariantGet")),
          Map.entry("try_variant_get", Set.of("variant.VariantGet")));

  private final Set<String> allowedClasses;
  private final Map<String, String> functionNames;

  private FunctionAllowlist(Set<String> allowedClasses, Map<String, String> functionNames) {
    this.allowedClasses = allowedClasses;
    this.functionNames = functionNames;
  }

  /** The list from the jar's resource, resolved against Spark's built-in registry. */
  static FunctionAllowlist load() {
    FunctionRegistry registry = FunctionRegistry$.MODULE$.builtin();
    Set<String> allowed = new HashSet<>();
    for (String name : STRUCTURAL) {
      allowed.add(EXPRESSIONS + name);
    }
    for (String name : names()) {
      Option<ExpressionInfo> info = registry.lookupFunction(FunctionIdentifier.apply(name));
      if (info.isEmpty()) {
        throw new IllegalStateException(
            RESOURCE + " lists '" + name + "', which is not a built-in function of this Spark");
      }
      allowed.add(info.get().getClassName());
      for (String built : BUILT.getOrDefault(name, Set.of())) {
        allowed.add(EXPRESSIONS + built);
      }
    }
    // The names a refusal uses: "the function reflect", not a class a user never wrote.
    Map<String, String> byClass = new HashMap<>();
    for (FunctionIdentifier id : CollectionConverters.asJava(registry.listFunction())) {
      Option<ExpressionInfo> info = registry.lookupFunction(id);
      if (info.isDefined()) {
        byClass.merge(info.get().getClassName(), id.funcName(), (a, b) -> a + "/" + b);
      }
    }
    return new FunctionAllowlist(Set.copyOf(allowed), Map.copyOf(byClass));
  }

  /** Whether `expression` itself (not its children) may run. */
  boolean allows(Expression expression) {
    return allowedClasses.contains(expression.getClass().getName());
  }

  /** What a refusal calls `expression`: its SQL function name(s) where it has one. */
  String describe(Expression expression) {
    String className = expression.getClass().getName();
    String names = functionNames.get(className);
    String simple = expression.getClass().getSimpleName();
    return names == null
        ? "the expression " + simple
        : "the function " + names.toLowerCase(Locale.ROOT) + " (" + simple + ")";
  }

  private static Set<String> names() {
    Set<String> names = new HashSet<>();
    try (InputStream in = FunctionAllowlist.class.getResourceAsStream(RESOURCE)) {
      if (in == null) {
        throw new IllegalStateException(RESOURCE + " is missing from the hub-thrift-auth jar");
      }
      BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
      for (String line = reader.readLine(); line != null; line = reader.readLine()) {
        String name = line.strip();
        if (!name.isEmpty() && !name.startsWith("#")) {
          names.add(name);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return names;
  }
}
