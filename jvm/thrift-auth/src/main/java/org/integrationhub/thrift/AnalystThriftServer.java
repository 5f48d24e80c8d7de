package org.integrationhub.thrift;

import java.lang.reflect.Method;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.WeakHashMap;
import org.apache.hadoop.hive.common.ServerUtils;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hive.service.Service;
import org.apache.hive.service.CompositeService;
import org.apache.hive.service.cli.CLIService;
import org.apache.hive.service.cli.HiveSQLException;
import org.apache.hive.service.cli.SessionHandle;
import org.apache.hive.service.cli.thrift.ThriftBinaryCLIService;
import org.apache.hive.service.rpc.thrift.TCloseSessionReq;
import org.apache.hive.service.rpc.thrift.TCloseSessionResp;
import org.apache.hive.service.rpc.thrift.TExecuteStatementReq;
import org.apache.hive.service.rpc.thrift.TExecuteStatementResp;
import org.apache.hive.service.rpc.thrift.TGetOperationStatusReq;
import org.apache.hive.service.rpc.thrift.TGetOperationStatusResp;
import org.apache.hive.service.rpc.thrift.TOpenSessionReq;
import org.apache.hive.service.rpc.thrift.TOpenSessionResp;
import org.apache.hive.service.rpc.thrift.TOperationState;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.hive.HiveUtils$;
import org.apache.spark.sql.hive.thriftserver.HiveThriftServer2;
import org.apache.spark.sql.hive.thriftserver.HiveThriftServer2$;
import org.apache.spark.sql.hive.thriftserver.ReflectionUtils$;
import org.apache.spark.sql.hive.thriftserver.SparkSQLCLIService;
import org.apache.spark.sql.hive.thriftserver.server.SparkSQLOperationManager;
import org.apache.thrift.TException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Starts Spark's Thrift server (HiveServer2, binary transport) with a guarded front door.
 *
 * <p>Spark's {@code HiveThriftServer2.startWithContext} builds the server's services itself; this
 * class builds the same ones, in the same order, except that the Thrift service is {@link
 * GuardedThriftService}, which refuses session and statement settings outside {@link
 * SessionSettings} before HiveServer2 applies any of them, keeps each session's {@link Login},
 * and runs a statement only when {@link StatementAllowlist} allows it for that login. Building
 * the server here rather than patching a started one means there is no moment when the
 * unguarded door is open.
 */
public final class AnalystThriftServer {

  private static final Logger LOG = LoggerFactory.getLogger(AnalystThriftServer.class);

  private AnalystThriftServer() {}

  /** Start serving `session` over the binary transport; mirrors Spark 4.0's own start. */
  public static HiveThriftServer2 start(SparkSession session) throws ReflectiveOperationException {
    HiveConf hiveConf =
        HiveUtils$.MODULE$
            .newClientForExecution(
                session.sparkContext().conf(), session.sessionState().newHadoopConf())
            .conf();
    String transport = hiveConf.getVar(HiveConf.ConfVars.HIVE_SERVER2_TRANSPORT_MODE);
    if (!"binary".equalsIgnoreCase(transport)) {
      throw new IllegalArgumentException(
          "The analysts' server runs the binary transport only, not '" + transport + "'.");
    }
    ServerUtils.cleanUpScratchDir(hiveConf);
    HiveThriftServer2$.MODULE$.systemExitOnError().set(false);

    HiveThriftServer2 server = new HiveThriftServer2(session);
    SparkSQLCLIService cli = new SparkSQLCLIService(server, session);
    ReflectionUtils$.MODULE$.setSuperField(server, "cliService", cli);
    addService(server, cli);
    GuardedThriftService thrift =
        new GuardedThriftService(
            cli,
            session.sharedState().jarClassLoader(),
            session.conf().get("spark.sql.thriftServer.queryTimeout", "0s"));
    ReflectionUtils$.MODULE$.setSuperField(server, "thriftCLIService", thrift);
    addService(server, thrift);
    server.initCompositeService(hiveConf);
    server.start();

    // The listener and UI tab Spark's start adds: sessions and statements report to them.
    Method listenerAndUi =
        HiveThriftServer2$.class.getDeclaredMethod(
            "createListenerAndUI", HiveThriftServer2.class, SparkContext.class);
    listenerAndUi.setAccessible(true);
    listenerAndUi.invoke(HiveThriftServer2$.MODULE$, server, session.sparkContext());
    LOG.info("the analysts' Thrift server started; session settings allowed: {}",
        SessionSettings.ALLOWED.keySet());
    return server;
  }

  private static void addService(CompositeService parent, Service child)
      throws ReflectiveOperationException {
    Method add = CompositeService.class.getDeclaredMethod("addService", Service.class);
    add.setAccessible(true);
    add.invoke(parent, child);
  }

  /** HiveServer2's binary Thrift service, refusing settings outside {@link SessionSettings}. */
  static final class GuardedThriftService extends ThriftBinaryCLIService {

    private final ClassLoader jarClassLoader;
    private final String statementTimeout;

    /** Each open session's login; a session gone is dropped with its Spark session. */
    private final Map<SparkSession, Login> logins = Collections.synchronizedMap(new WeakHashMap<>());

    GuardedThriftService(
        CLIService cliService, ClassLoader jarClassLoader, String statementTimeout) {
      super(cliService);
      this.jarClassLoader = jarClassLoader;
      this.statementTimeout = statementTimeout;
    }

    /**
     * Reports a statement cancelled at the time limit as an error that says so.
     *
     * <p>HiveServer2 reports it in a state of its own ({@code TIMEDOUT_STATE}) that some clients
     * do not know (impyla fails on it with a bare {@code KeyError: 8}); an error state with a
     * message is understood by every client.
     */
    @Override
    public TGetOperationStatusResp GetOperationStatus(TGetOperationStatusReq request)
        throws TException {
      TGetOperationStatusResp response = super.GetOperationStatus(request);
      if (response.getOperationState() == TOperationState.TIMEDOUT_STATE) {
        response.setOperationState(TOperationState.ERROR_STATE);
        response.setSqlState("57014");
        response.setErrorMessage(
            "The statement ran past the analysts' server's time limit of "
                + statementTimeout
                + " (HUB_ANALYST_STATEMENT_TIMEOUT_SECONDS) and was cancelled. Narrow it (a"
                + " filter on the table's partition or time column, a LIMIT) or ask the"
                + " operator for a longer limit.");
      }
      return response;
    }

    @Override
    public TOpenSessionResp OpenSession(TOpenSessionReq request) throws TException {
      // The connection's login, made on this thread just before (HubKeyAuthenticator).
      Login login = HubKeyAuthenticator.takeLogin();
      String refused = SessionSettings.refusal(request.getConfiguration());
      if (refused == null && login == null && HubKeyAuthenticator.configured()) {
        refused = "The analysts' server cannot tell who logged in; connect again.";
      }
      if (refused == null) {
        TOpenSessionResp response = openWithSchema(request);
        if (response.getSessionHandle() != null) {
          SparkSession session = sessionOf(new SessionHandle(response.getSessionHandle()));
          if (session != null && login != null) {
            logins.put(session, login);
          }
        }
        return response;
      }
      AnalystThriftServer.LOG.warn("refused a session of user '{}': {}", printable(request.getUsername()), refused);
      TOpenSessionResp response = new TOpenSessionResp();
      response.setServerProtocolVersion(request.getClient_protocol());
      response.setStatus(HiveSQLException.toTStatus(new HiveSQLException(refused, "42000")));
      return response;
    }

    @Override
    public TExecuteStatementResp ExecuteStatement(TExecuteStatementReq request)
        throws TException {
      String refused = SessionSettings.refusal(request.getConfOverlay());
      if (refused == null) {
        SparkSession session = sessionOf(new SessionHandle(request.getSessionHandle()));
        Login login = session == null ? null : logins.get(session);
        if (session == null || (login == null && HubKeyAuthenticator.configured())) {
          refused = "The analysts' server does not know this session; open a new connection.";
        } else {
          refused = StatementAllowlist.refusal(session, request.getStatement(), login);
        }
      }
      if (refused == null) {
        return super.ExecuteStatement(request);
      }
      TExecuteStatementResp response = new TExecuteStatementResp();
      response.setStatus(HiveSQLException.toTStatus(new HiveSQLException(refused, "42000")));
      return response;
    }

    @Override
    public TCloseSessionResp CloseSession(TCloseSessionReq request) throws TException {
      SparkSession session = sessionOf(new SessionHandle(request.getSessionHandle()));
      if (session != null) {
        logins.remove(session);
      }
      return super.CloseSession(request);
    }

    /**
     * Opens the session, then moves it to the schema the client asked for ({@code use:database}).
     *
     * <p>HiveServer2 would run that {@code USE} while opening the session, on a thread whose class
     * loader Hive has just replaced with one that cannot see the session's jars (Delta's catalog
     * among them), so every schema but the default failed. The hub runs it here instead, with the
     * session's jar class loader, as Spark's statement threads do.
     */
    private TOpenSessionResp openWithSchema(TOpenSessionReq request) throws TException {
      Map<String, String> settings =
          request.getConfiguration() == null ? Map.of() : request.getConfiguration();
      String schema = settings.get(SessionSettings.USE_DATABASE);
      if (schema != null) {
        Map<String, String> rest = new HashMap<>(settings);
        rest.remove(SessionSettings.USE_DATABASE);
        request.setConfiguration(rest);
      }
      TOpenSessionResp response = super.OpenSession(request);
      if (schema == null || response.getSessionHandle() == null) {
        return response;
      }
      SessionHandle handle = new SessionHandle(response.getSessionHandle());
      SparkSession session = sessionOf(handle);
      Thread thread = Thread.currentThread();
      ClassLoader before = thread.getContextClassLoader();
      thread.setContextClassLoader(jarClassLoader);
      try {
        // The name matched SessionSettings' pattern of plain identifiers: quoting is enough.
        session.sql("USE `" + schema + "`");
        return response;
      } catch (Exception e) {
        try {
          cliService.closeSession(handle);
        } catch (HiveSQLException closing) {
          AnalystThriftServer.LOG.warn("could not close a refused session: {}", closing.getMessage());
        }
        TOpenSessionResp refused = new TOpenSessionResp();
        refused.setServerProtocolVersion(request.getClient_protocol());
        refused.setStatus(
            HiveSQLException.toTStatus(
                new HiveSQLException(
                    "Cannot open the session in schema '" + schema + "': " + e.getMessage(),
                    "42000")));
        return refused;
      } finally {
        thread.setContextClassLoader(before);
      }
    }

    /** The Spark session of the client's Thrift session, or null when it has none. */
    private SparkSession sessionOf(SessionHandle handle) {
      // Set while the connection's session is open (SparkSQLSessionManager.openSession).
      return ((SparkSQLOperationManager) cliService.getSessionManager().getOperationManager())
          .sessionToContexts()
          .get(handle);
    }
  }

  private static String printable(String user) {
    if (user == null) {
      return "";
    }
    String cut = user.length() > 64 ? user.substring(0, 64) : user;
    return cut.replaceAll("\\p{Cntrl}", "?");
  }
}
