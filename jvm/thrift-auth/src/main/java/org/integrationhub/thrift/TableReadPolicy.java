package org.integrationhub.thrift;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.common.cache.Cache;
import com.google.common.cache.CacheBuilder;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Pattern;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.analysis.ResolvedTable;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.HiveTableRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.connector.catalog.CatalogPlugin;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.execution.command.CreateViewCommand;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Read grants on tables: a team reads a table only when it may read every feed it is built from.
 *
 * <p>Every table the hub's loader makes carries the feeds its rows come from in its {@code
 * hub.feeds} property (a bronze, silver or quarantine table its feed; a gold table its model's
 * sources, so a gold table follows the strictest of them). The feeds' read policies are the hub
 * API's ({@code GET /v1/feeds/{topic}/readers}): every team, or the owner and the teams it
 * grants. Admin keys read every table. A table that names no feed, or a feed the hub does not
 * know, is read by admins only: what cannot be checked is refused.
 *
 * <p>Every table a statement names is checked: those it reads (including through views,
 * subqueries and CTEs) and those it describes or shows the columns, properties or history of.
 * Names and columns of tables are not secret: {@code SHOW TABLES} lists every table, as the
 * registry serves every schema.
 *
 * <p>Both answers are kept for {@link #FRESH} so that a busy session does not ask the catalog and
 * the API at every statement; a grant or a revocation takes effect within that time.
 */
final class TableReadPolicy {

  /**
   * The table property naming a table's feeds, comma-separated
   * (spark_loaders/tables/delta_tables.py).
   */
  static final String FEEDS_PROPERTY = "hub.feeds";

  private static final Logger LOG = LoggerFactory.getLogger(TableReadPolicy.class);
  private static final Duration FRESH = Duration.ofSeconds(5);
  private static final int MAX_CACHED = 10_000;
  private static final Pattern TOPIC = Pattern.compile("[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)+");
  private static final ObjectMapper JSON = new ObjectMapper();

  /** A table of a catalog, as the check names it. */
  private record TableName(String catalog, List<String> namespace, String name) {
    String display() {
      return String.join(".", namespace) + (namespace.isEmpty() ? "" : ".") + name;
    }
  }

  /** Who reads a feed; {@code owner} is null for a feed the hub does not know. */
  private record Readers(String owner, boolean everyTeam, Set<String> teams) {
    static final Readers UNKNOWN = new Readers(null, false, Set.of());

    boolean allow(String team) {
      return owner != null && (everyTeam || owner.equals(team) || teams.contains(team));
    }
  }

  /** Why a table's grants could not be checked: the catalog or the API failed. */
  private static final class Unchecked extends Exception {
    Unchecked(String message) {
      super(message);
    }
  }

  /** `catalog.namespace.name` to the table's {@code hub.feeds} ("" when it has none). */
  private static final Cache<String, String> TABLE_FEEDS = newCache();

  /** A feed's topic to its readers. */
  private static final Cache<String, Readers> FEED_READERS = newCache();

  private TableReadPolicy() {}

  /**
   * Why `login` may not run the analysed `plan` in `session`, or null when it may read every
   * table the plan names. A null `login` (a server without key logins) and admin keys read all.
   */
  static String refusal(SparkSession session, Login login, LogicalPlan plan) {
    if (login == null || login.admin()) {
      return null;
    }
    Set<TableName> tables = new LinkedHashSet<>();
    collect(session, plan, tables);
    for (TableName table : tables) {
      String refused = refusal(session, login, table);
      if (refused != null) {
        return refused;
      }
    }
    return null;
  }

  private static String refusal(SparkSession session, Login login, TableName table) {
    String feeds;
    List<String> refusedFeeds = new ArrayList<>();
    try {
      feeds = feedsOf(session, table);
      if (feeds.isEmpty()) {
        return "Only admins read "
            + table.display()
            + ": it names no feed it is built from (its "
            + FEEDS_PROPERTY
            + " property), so its read grants are not known. Tables the hub's loader makes name"
            + " theirs.";
      }
      for (String feed : feeds.split(",")) {
        Readers readers = readersOf(login, feed);
        if (readers.owner() == null) {
          return "Only admins read "
              + table.display()
              + ": it is built from feed '"
              + feed
              + "', which the hub does not know (deleted, or never created).";
        }
        if (!readers.allow(login.team())) {
          refusedFeeds.add("'" + feed + "' (team " + readers.owner() + ")");
        }
      }
    } catch (Unchecked e) {
      LOG.warn("could not check {}'s reads of {}: {}", login, table.display(), e.getMessage());
      return "Cannot check read grants on " + table.display() + " now: " + e.getMessage();
    }
    if (refusedFeeds.isEmpty()) {
      return null;
    }
    LOG.info("refused {} a read of {}", login, table.display());
    return "Team "
        + login.team()
        + " may not read "
        + table.display()
        + ": it is built from "
        + String.join(", ", refusedFeeds)
        + ", read only by its owner and the teams it grants. The owner grants reads with `hub"
        + " feed grant <topic> "
        + login.team()
        + "` (docs/security.md, read grants).";
  }

  /** Every table `plan` names: its relations, and the tables its commands name. */
  private static void collect(SparkSession session, LogicalPlan plan, Set<TableName> out) {
    if (plan instanceof CreateViewCommand view) {
      // The name it creates is a temporary view's, not a table's; its query is what reads.
      collect(session, view.plan(), out);
      return;
    }
    TableName relation = relationTable(plan);
    if (relation != null) {
      out.add(relation);
    }
    java.util.Iterator<Object> elements = CollectionConverters.asJava(plan.productIterator());
    while (elements.hasNext()) {
      TableName named = namedTable(session, elements.next());
      if (named != null) {
        out.add(named);
      }
    }
    for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
      collect(session, child, out);
    }
    for (LogicalPlan subquery : CollectionConverters.asJava(plan.subqueries())) {
      collect(session, subquery, out);
    }
  }

  /** The table a relation reads, or null when `plan` reads none of the catalog's. */
  private static TableName relationTable(LogicalPlan plan) {
    if (plan instanceof LogicalRelation relation && relation.catalogTable().isDefined()) {
      return fromCatalogTable(relation.catalogTable().get());
    }
    if (plan instanceof HiveTableRelation relation) {
      return fromCatalogTable(relation.tableMeta());
    }
    if (plan instanceof DataSourceV2Relation relation && relation.identifier().isDefined()) {
      String catalog =
          relation.catalog().isDefined() ? relation.catalog().get().name() : "spark_catalog";
      return fromIdentifier(catalog, relation.identifier().get());
    }
    if (plan instanceof ResolvedTable resolved) {
      return fromIdentifier(resolved.catalog().name(), resolved.identifier());
    }
    return null;
  }

  /**
   * The table a command's field names: a {@code TableIdentifier} (DESCRIBE, SHOW TBLPROPERTIES,
   * SHOW CREATE TABLE, SHOW COLUMNS), optional or not, or a Delta table
   * (DESCRIBE HISTORY). A temporary view is not a table: its query was checked when it was made.
   */
  private static TableName namedTable(SparkSession session, Object element) {
    Object value = element;
    if (value instanceof Option<?> option) {
      value = option.isDefined() ? option.get() : null;
    }
    if (value instanceof TableIdentifier identifier) {
      if (identifier.database().isEmpty()
          && session.sessionState().catalog().isTempView(identifier)) {
        return null;
      }
      String database =
          identifier.database().isDefined()
              ? identifier.database().get()
              : session.sessionState().catalog().getCurrentDatabase();
      String catalog =
          identifier.catalog().isDefined() ? identifier.catalog().get() : "spark_catalog";
      return new TableName(catalog, List.of(database), identifier.table());
    }
    if (value != null
        && value.getClass().getName().equals("org.apache.spark.sql.delta.catalog.DeltaTableV2")) {
      try {
        Object table = value.getClass().getMethod("catalogTable").invoke(value);
        if (table instanceof Option<?> option && option.isDefined()) {
          return fromCatalogTable((CatalogTable) option.get());
        }
      } catch (ReflectiveOperationException e) {
        LOG.warn("cannot name the Delta table of a statement: {}", e.toString());
      }
    }
    return null;
  }

  private static TableName fromCatalogTable(CatalogTable table) {
    TableIdentifier identifier = table.identifier();
    String catalog = identifier.catalog().isDefined() ? identifier.catalog().get() : "spark_catalog";
    String database = identifier.database().isDefined() ? identifier.database().get() : "default";
    return new TableName(catalog, List.of(database), identifier.table());
  }

  private static TableName fromIdentifier(String catalog, Identifier identifier) {
    return new TableName(catalog, List.of(identifier.namespace()), identifier.name());
  }

  /** The table's {@code hub.feeds}, "" when it has none or is not a table of the catalog. */
  private static String feedsOf(SparkSession session, TableName table) throws Unchecked {
    String key = table.catalog() + "." + table.display();
    String known = TABLE_FEEDS.getIfPresent(key);
    if (known != null) {
      return known;
    }
    String feeds;
    try {
      CatalogPlugin plugin = session.sessionState().catalogManager().catalog(table.catalog());
      if (plugin instanceof TableCatalog catalog) {
        Identifier identifier =
            Identifier.of(table.namespace().toArray(new String[0]), table.name());
        String value = catalog.loadTable(identifier).properties().get(FEEDS_PROPERTY);
        feeds = value == null ? "" : value.strip();
      } else {
        feeds = "";
      }
    } catch (org.apache.spark.sql.catalyst.analysis.NoSuchTableException e) {
      feeds = ""; // a view: its tables are checked where its query is read
    } catch (Exception e) {
      throw new Unchecked("the catalog did not load it (" + e.getClass().getSimpleName() + ").");
    }
    TABLE_FEEDS.put(key, feeds);
    return feeds;
  }

  /** Who reads `feed`, as the hub API says; unknown when it is not a feed's topic. */
  private static Readers readersOf(Login login, String feed) throws Unchecked {
    if (!TOPIC.matcher(feed).matches()) {
      return Readers.UNKNOWN;
    }
    Readers known = FEED_READERS.getIfPresent(feed);
    if (known != null) {
      return known;
    }
    HttpResponse<String> response;
    try {
      response = HubKeyAuthenticator.get("/v1/feeds/" + feed + "/readers", login.key());
    } catch (IOException e) {
      throw new Unchecked("the hub API did not answer (" + e.getClass().getSimpleName() + ").");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new Unchecked("interrupted while asking the hub API.");
    }
    Readers readers;
    if (response.statusCode() == 404) {
      readers = Readers.UNKNOWN;
    } else if (response.statusCode() == 401 || response.statusCode() == 403) {
      throw new Unchecked("the hub API no longer accepts this session's key; log in again.");
    } else if (response.statusCode() != 200) {
      throw new Unchecked("the hub API answered HTTP " + response.statusCode() + ".");
    } else {
      readers = parse(response.body());
    }
    FEED_READERS.put(feed, readers);
    return readers;
  }

  private static Readers parse(String body) throws Unchecked {
    try {
      JsonNode answer = JSON.readTree(body);
      Set<String> teams = new HashSet<>();
      answer.path("readers").forEach(team -> teams.add(team.asText()));
      String owner = answer.path("owner").asText(null);
      if (owner == null) {
        throw new Unchecked("the hub API's answer names no owner.");
      }
      return new Readers(owner, answer.path("read_public").asBoolean(false), Set.copyOf(teams));
    } catch (IOException e) {
      throw new Unchecked("the hub API's answer is not JSON.");
    }
  }

  /** A cache whose answers expire after {@link #FRESH}, evicting the least used past its bound. */
  private static <V> Cache<String, V> newCache() {
    return CacheBuilder.newBuilder().maximumSize(MAX_CACHED).expireAfterWrite(FRESH).build();
  }
}
