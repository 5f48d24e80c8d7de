package org.integrationhub.thrift;

/**
 * Who a session logged in as: the team of its key (null for an admin key without one), whether
 * the key is an admin's, and the key itself, with which the server asks the hub API about read
 * grants for the session ({@link TableReadPolicy}).
 *
 * <p>The key lives in memory only while its session is open, and {@link #toString} leaves it
 * out, so that no log line or message can carry it.
 */
record Login(String team, boolean admin, String keyId, String key) {

  @Override
  public String toString() {
    return admin ? "admin key " + keyId : "team " + team + " (key " + keyId + ")";
  }
}
