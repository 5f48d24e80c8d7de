package org.integrationhub.thrift;

import com.google.common.cache.Cache;
import com.google.common.cache.CacheBuilder;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.HexFormat;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.security.sasl.AuthenticationException;
import org.apache.hive.service.auth.PasswdAuthenticationProvider;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Lets a HiveServer2 login in when its password is a valid hub API key.
 *
 * <p>The Thrift server runs with {@code hive.server2.authentication=CUSTOM} and this class as
 * {@code hive.server2.custom.authentication.class}. The user name is free (it only names the
 * session); the key says who connects. The key is checked by the hub API ({@code GET
 * /v1/whoami}), so revoking a key there locks it out here too, within the cache time.
 *
 * <p>Why the settings are set once, by {@link #configure}: HiveServer2's {@code
 * CustomAuthenticationProviderImpl} builds a new instance of this class for every login, and a
 * setting read at each login from a mutable place (a Java system property, which a session's
 * {@code set:system:} handshake setting could write) would let a caller repoint the key check. So
 * {@code spark_loaders/services/analyst.py} calls {@link #configure} once, from the hub's
 * settings, before the server starts; a second call is refused, and the settings, cache and HTTP
 * client are static because an instance lives for one login only.
 *
 * <p>Who logged in is handed to the session the connection opens next: HiveServer2 checks a
 * connection's login (SASL) and then serves all its calls on one worker thread, so {@link
 * #Authenticate} leaves the {@link Login} on that thread and {@link #takeLogin}, called when the
 * connection opens its session, takes it ({@link AnalystThriftServer}). Every connection logs in
 * before any call, so a thread never serves a call with an earlier connection's login.
 *
 * <p>The key never reaches a log line or an error message; the cache keeps only its SHA-256.
 */
public final class HubKeyAuthenticator implements PasswdAuthenticationProvider {

  /** What the provider was configured with: where the API is and how long to trust a key. */
  private record Settings(String base, URI whoami, Duration timeout, HttpClient client) {}

  private static final Logger LOG = LoggerFactory.getLogger(HubKeyAuthenticator.class);
  private static final int MAX_CACHED_KEYS = 10_000;
  private static final Pattern KEY_ID = Pattern.compile("\"key_id\"\\s*:\\s*\"([^\"]{1,64})\"");
  private static final Pattern TEAM = Pattern.compile("\"team\"\\s*:\\s*\"([^\"]{1,64})\"");
  private static final Pattern ROLE = Pattern.compile("\"role\"\\s*:\\s*\"([^\"]{1,64})\"");

  /** The roles of `GET /v1/whoami` whose keys may log in: people's keys, not the loader's. */
  private static final java.util.Set<String> LOGIN_ROLES = java.util.Set.of("team", "admin");

  /** A verified key: whom it belongs to. */
  private record Verified(String team, boolean admin, String keyId) {}

  /**
   * SHA-256 of each verified key, hex, to what the API said of it, for the configured cache time;
   * made by {@link #configure}.
   */
  private static volatile Cache<String, Verified> verified;

  /** The login this thread's connection made; taken when the connection opens its session. */
  private static final ThreadLocal<Login> LOGIN = new ThreadLocal<>();

  private static volatile Settings settings;

  /**
   * Sets where keys are checked and how long a verified one is trusted; once per JVM.
   *
   * @param apiUrl base URL of the hub API, e.g. {@code http://127.0.0.1:8080}
   * @param timeoutMillis how long one key check may take
   * @param cacheSeconds how long a verified key is trusted without asking the API again
   */
  public static synchronized void configure(String apiUrl, long timeoutMillis, long cacheSeconds) {
    if (settings != null) {
      throw new IllegalStateException("the hub key authenticator is configured already");
    }
    String base = apiUrl.strip().replaceAll("/+$", "");
    URI whoami = URI.create(base + "/v1/whoami");
    if (!("http".equals(whoami.getScheme()) || "https".equals(whoami.getScheme()))) {
      throw new IllegalArgumentException("the hub API URL must be http or https: " + base);
    }
    Duration timeout = Duration.ofMillis(timeoutMillis);
    HttpClient client =
        HttpClient.newBuilder()
            .connectTimeout(timeout)
            .followRedirects(HttpClient.Redirect.NEVER)
            .build();
    verified =
        CacheBuilder.newBuilder()
            .maximumSize(MAX_CACHED_KEYS)
            .expireAfterWrite(Duration.ofSeconds(cacheSeconds))
            .build();
    settings = new Settings(base, whoami, timeout, client);
  }

  /** Whether {@link #configure} ran: logins then need keys, and sessions their logins. */
  static boolean configured() {
    return settings != null;
  }

  /** The login this thread's connection made, or null; it is cleared. */
  static Login takeLogin() {
    Login login = LOGIN.get();
    LOGIN.remove();
    return login;
  }

  /**
   * GET `path` (with its query) of the hub API with `key`, within the configured time limit.
   *
   * @throws IOException when the API cannot be reached or the provider is not configured
   */
  static HttpResponse<String> get(String path, String key)
      throws IOException, InterruptedException {
    Settings current = settings;
    if (current == null) {
      throw new IOException("the hub API's address is not configured");
    }
    HttpRequest request =
        // Appended, not resolved: an API served under a path (`https://host/hub`) keeps it.
        HttpRequest.newBuilder(URI.create(current.base() + path))
            .timeout(current.timeout())
            .header("Authorization", "Bearer " + key)
            .header("Accept", "application/json")
            .GET()
            .build();
    return current.client().send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
  }

  /** HiveServer2 constructs the provider by reflection, with no arguments. */
  public HubKeyAuthenticator() {}

  @Override
  public void Authenticate(String user, String password) throws AuthenticationException {
    LOGIN.remove();
    String who = printable(user);
    if (password == null || password.isBlank()) {
      LOG.warn("refused a login of user '{}': no password (a hub API key is needed)", who);
      throw new AuthenticationException(
          "No password: give a hub API key as the password (beeline -p, JDBC password).");
    }
    Settings current = settings;
    if (current == null) {
      LOG.error("cannot check logins: the authenticator was not configured at start");
      throw new AuthenticationException(
          "The Thrift server cannot check API keys: its authenticator is not configured.");
    }
    String digest = sha256(password);
    Verified known = verified.getIfPresent(digest);
    if (known != null) {
      LOG.debug("user '{}' logged in with a recently verified key", who);
      LOGIN.set(new Login(known.team(), known.admin(), known.keyId(), password));
      return;
    }
    String body = askApi(current, who, password);
    String role = field(ROLE, body, "?");
    if (!LOGIN_ROLES.contains(role)) {
      // A loader's key reads schemas for the loader; people log in with team or admin keys.
      LOG.warn(
          "refused a login of user '{}': key {} has the role '{}', which may not log in",
          who,
          field(KEY_ID, body, "?"),
          role);
      throw new AuthenticationException(
          "This key's role ('" + role + "') may not log in here. Use a team or admin key.");
    }
    boolean admin = "admin".equals(role);
    String team = field(TEAM, body, null);
    String keyId = field(KEY_ID, body, "?");
    if (!admin && team == null) {
      throw new AuthenticationException("The hub API named no team for this key; ask an admin.");
    }
    verified.put(digest, new Verified(team, admin, keyId));
    LOGIN.set(new Login(team, admin, keyId, password));
    LOG.info("user '{}' logged in with key {} ({})", who, keyId, admin ? "admin key" : "team " + team);
  }

  /** The API's answer about the key; throws unless the API knows it. */
  private static String askApi(Settings current, String who, String key)
      throws AuthenticationException {
    String apiUrl = current.whoami().toString();
    HttpResponse<String> response;
    try {
      HttpRequest request =
          HttpRequest.newBuilder(current.whoami())
              .timeout(current.timeout())
              .header("Authorization", "Bearer " + key)
              .header("Accept", "application/json")
              .GET()
              .build();
      response =
          current.client().send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
    } catch (IOException | IllegalArgumentException e) {
      // The messages of these exceptions name the URL and the cause, never request headers.
      LOG.warn(
          "refused a login of user '{}': the hub API at {} did not answer ({}: {})",
          who,
          apiUrl,
          e.getClass().getSimpleName(),
          e.getMessage());
      throw new AuthenticationException(
          "Cannot check the API key: the hub API at "
              + apiUrl
              + " did not answer. Try again when it is reachable.");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AuthenticationException("Interrupted while checking the API key.");
    }
    int status = response.statusCode();
    if (status == 200) {
      return response.body();
    }
    if (status == 401 || status == 403) {
      LOG.warn("refused a login of user '{}': the hub API does not accept the key", who);
      throw new AuthenticationException(
          "The password is not a valid hub API key (unknown or revoked). Use a team or admin key.");
    }
    LOG.warn(
        "refused a login of user '{}': the hub API at {} answered {} to the key check",
        who,
        apiUrl,
        status);
    throw new AuthenticationException(
        "Cannot check the API key: the hub API at "
            + apiUrl
            + " answered HTTP "
            + status
            + ". Try again later.");
  }

  private static String sha256(String text) {
    try {
      MessageDigest digest = MessageDigest.getInstance("SHA-256");
      return HexFormat.of().formatHex(digest.digest(text.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM has SHA-256", e);
    }
  }

  /** A JSON string field of the API's answer, found without a JSON library on the classpath. */
  private static String field(Pattern pattern, String body, String missing) {
    Matcher matcher = pattern.matcher(body);
    return matcher.find() ? matcher.group(1) : missing;
  }

  /** The user name as given, cut to 64 characters and without control characters, for logs. */
  private static String printable(String user) {
    if (user == null) {
      return "";
    }
    String cut = user.length() > 64 ? user.substring(0, 64) : user;
    return cut.replaceAll("\\p{Cntrl}", "?");
  }
}
