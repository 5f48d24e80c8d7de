package org.integrationhub.thrift;

import java.util.Map;
import java.util.function.Predicate;
import java.util.regex.Pattern;

/**
 * Which settings a client may send when it opens a session, or with a statement: an allow-list.
 *
 * <p>HiveServer2 applies a session's handshake settings before the session runs anything: {@code
 * set:system:k} sets a Java system property of the whole server, {@code set:hiveconf:k} a
 * setting of the session (Spark copies it into the session's SQL settings), {@code set:hivevar:k}
 * a variable, {@code use:database} the current schema. The first two let a session undo the
 * server's safety (variable substitution, the login provider's class), so the server refuses
 * every key but these, with values of a known shape.
 */
final class SessionSettings {

  private static final Pattern NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,127}");
  private static final Pattern COUNT = Pattern.compile("[0-9]{1,9}");

  /** The schema a session starts in. */
  static final String USE_DATABASE = "use:database";

  /** The keys a client may send, each with the values it may have. */
  static final Map<String, Predicate<String>> ALLOWED =
      Map.of(
          // The schema the session starts in: beeline's and the JDBC URL's `/<database>`.
          USE_DATABASE, value -> NAME.matcher(value).matches(),
          // How many rows a fetch returns: the Hive JDBC driver's `fetchSize`.
          "set:hiveconf:hive.server2.thrift.resultset.default.fetch.size",
              value -> COUNT.matcher(value).matches());

  private SessionSettings() {}

  /** Why `settings` are refused (naming the first key at fault), or null when they are allowed. */
  static String refusal(Map<String, String> settings) {
    if (settings == null) {
      return null;
    }
    for (Map.Entry<String, String> entry : settings.entrySet()) {
      String key = entry.getKey() == null ? "" : entry.getKey();
      Predicate<String> valid = ALLOWED.get(key);
      if (valid == null) {
        return "The analysts' server refuses the session setting '"
            + printable(key)
            + "': a session may set only "
            + String.join(", ", ALLOWED.keySet().stream().sorted().toList())
            + ". The server's settings are fixed by the hub (docs/security.md).";
      }
      String value = entry.getValue() == null ? "" : entry.getValue();
      if (!valid.test(value)) {
        return "The analysts' server refuses the value of the session setting '"
            + key
            + "': '"
            + printable(value)
            + "' is not a valid value (a schema name, or a row count).";
      }
    }
    return null;
  }

  /** `text` cut to 80 characters and without control characters, for a message. */
  private static String printable(String text) {
    String cut = text.length() > 80 ? text.substring(0, 80) + "..." : text;
    return cut.replaceAll("\\p{Cntrl}", "?");
  }
}
