"""`hub up` keeps its secrets: HUB_HOME is its user's alone, the admin's and the loader's key
files are private from their first byte, and each child process starts with only the secrets
it needs: the loader with a key of its own that only reads."""

import os
import stat
from pathlib import Path

import pytest
from sqlalchemy import Engine

from catalog.teams import TeamStore
from catalog.types import KeyRole
from hub_cli.errors import StackError
from hub_cli.local_keys import local_key, private_home, write_secret
from hub_cli.stack import CHILD_SECRETS, LocalStack, child_env
from hub_core.database import create_database_engine
from hub_core.environment import child_environment

pytestmark = pytest.mark.unit

PARENT = {
    "PATH": "/usr/bin",
    "JAVA_HOME": "/opt/java",
    "AWS_SECRET_ACCESS_KEY": "s3a-credentials",
    "HUB_HOME": "/srv/hub",
    "HUB_API_PORT": "8080",
    "HUB_API_KEY_CACHE_SECONDS": "5",
    "HUB_API_KEY": "hub_0123456789ab_operators-cli-key",
    "HUB_REGISTRY_DATABASE_URL": "postgresql+psycopg://hub:pw@db/hub",
    "HUB_LOADER_METASTORE_URL": "jdbc:postgresql://meta/hive?password=pw",
    "HUB_LOADER_METASTORE_PASSWORD": "metastore-pw",
    "HUB_LOADER_REGISTRY_KEY": "hub_0123456789ab_loader-key",
    "HUB_LOADER_S3_ACCESS_KEY": "hub-loader",
    "HUB_LOADER_S3_SECRET_KEY": "s3-secret-key",
}


def _env(name: str, parent: dict[str, str] = PARENT) -> dict[str, str]:
    return child_env(
        name,
        parent=parent,
        bootstrap_servers="127.0.0.1:9092",
        api_url="http://127.0.0.1:8080",
        loader_key="hub_abcdef012345_loader-key",
    )


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("role", [KeyRole.ADMIN, KeyRole.LOADER])
def test_each_local_key_file_is_created_0600_and_holds_a_key_of_its_role(
    hub_engine: Engine, tmp_path: Path, role: KeyRole
) -> None:
    teams = TeamStore(hub_engine)
    path = tmp_path / "home" / f"{role}.key"
    path.parent.mkdir()
    old_umask = os.umask(0)  # even with a permissive umask
    try:
        token = local_key(teams, path, role=role)
    finally:
        os.umask(old_umask)

    assert _mode(path) == 0o600
    assert path.read_text() == token + "\n"
    principal = teams.verify(token)
    assert principal is not None and principal.role is role
    assert local_key(teams, path, role=role) == token  # kept while private and valid
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_a_loader_key_file_holding_another_key_gets_a_loader_key(
    hub_engine: Engine, tmp_path: Path
) -> None:
    teams = TeamStore(hub_engine)
    path = tmp_path / "loader.key"
    admin = local_key(teams, path, role=KeyRole.ADMIN)  # say, copied over by hand

    token = local_key(teams, path, role=KeyRole.LOADER)

    principal = teams.verify(token)
    assert principal is not None and principal.role is KeyRole.LOADER
    assert teams.verify(admin) is not None  # someone's admin key, not this file's to revoke


def test_hub_home_is_made_private_to_its_user_even_with_a_permissive_umask(
    tmp_path: Path,
) -> None:
    old_umask = os.umask(0)
    try:
        home = private_home(tmp_path / "work" / ".hub")
    finally:
        os.umask(old_umask)

    assert _mode(home) == 0o700


def test_a_hub_home_open_to_others_is_tightened_to_its_user(tmp_path: Path) -> None:
    home = tmp_path / ".hub"
    home.mkdir()
    home.chmod(0o755)  # as `make setup` may leave it, with jars and tools inside
    (home / "admin.key").write_text("kept\n")

    private_home(home)

    assert _mode(home) == 0o700
    assert (home / "admin.key").read_text() == "kept\n"


def test_a_hub_home_of_another_user_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / ".hub"
    home.mkdir(mode=0o755)
    owner = home.stat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1)

    with pytest.raises(StackError, match=r"HUB_HOME .* belongs to user id"):
        private_home(home)
    assert _mode(home) == 0o755  # not someone else's to change


def test_hub_up_runs_the_loader_with_a_key_of_its_own_that_only_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / ".hub"
    for name in [n for n in os.environ if n.startswith("HUB_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HUB_HOME", str(home))
    monkeypatch.setenv("HUB_REGISTRY_DATABASE_URL", f"sqlite:///{tmp_path / 'hub.db'}")
    stack = LocalStack(demo_feeds=False)
    private_home(home)

    stack._prepare_catalog()
    loader = stack._child_env("loader")

    token = loader["HUB_LOADER_REGISTRY_KEY"]
    assert (home / "loader.key").read_text() == token + "\n"
    assert _mode(home / "loader.key") == 0o600 and _mode(home / "admin.key") == 0o600
    assert token != (home / "admin.key").read_text().strip()
    engine = create_database_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    try:
        principal = TeamStore(engine).verify(token)
    finally:
        engine.dispose()
    assert principal is not None and principal.role is KeyRole.LOADER
    assert principal.team is None and not principal.admin
    assert "HUB_REGISTRY_DATABASE_URL" not in loader


def test_a_world_readable_admin_key_is_revoked_and_replaced_by_a_private_one(
    hub_engine: Engine, tmp_path: Path
) -> None:
    teams = TeamStore(hub_engine)
    path = tmp_path / "admin.key"
    exposed = local_key(teams, path, role=KeyRole.ADMIN)
    path.chmod(0o644)

    token = local_key(teams, path, role=KeyRole.ADMIN)

    assert token != exposed
    assert teams.verify(exposed) is None  # someone may have read it: it no longer works
    assert _mode(path) == 0o600 and path.read_text() == token + "\n"


def test_writing_a_secret_replaces_the_file_rather_than_writing_into_it(tmp_path: Path) -> None:
    path = tmp_path / "admin.key"
    path.write_text("old\n")
    path.chmod(0o666)
    other_link = tmp_path / "hard-link"
    os.link(path, other_link)

    write_secret(path, "new\n")

    assert path.read_text() == "new\n" and _mode(path) == 0o600
    assert other_link.read_text() == "old\n"  # the old inode was not written into


def test_the_metastore_and_kafka_jvms_get_no_hub_secret() -> None:
    env = child_environment(parent=PARENT)

    assert sorted(k for k in env if k.startswith("HUB_")) == [
        "HUB_API_KEY_CACHE_SECONDS",
        "HUB_API_PORT",
        "HUB_HOME",
    ]
    assert env["HUB_HOME"] == "/srv/hub" and env["JAVA_HOME"] == "/opt/java"
    assert env["HUB_API_KEY_CACHE_SECONDS"] == "5"  # a setting, not a key


def test_the_api_server_gets_the_database_url_and_no_key() -> None:
    env = _env("API server")

    assert env["HUB_REGISTRY_DATABASE_URL"] == PARENT["HUB_REGISTRY_DATABASE_URL"]
    assert env["HUB_KAFKA_BOOTSTRAP_SERVERS"] == "127.0.0.1:9092"
    assert env["HUB_API_PORT"] == "8080"
    for absent in (
        "HUB_API_KEY",
        "HUB_LOADER_REGISTRY_KEY",
        "HUB_LOADER_METASTORE_URL",
        "HUB_LOADER_METASTORE_PASSWORD",
    ):
        assert absent not in env


def test_the_loader_gets_its_registry_key_and_metastore_but_not_the_database_url() -> None:
    env = _env("loader")

    assert "HUB_REGISTRY_DATABASE_URL" not in env and "HUB_API_KEY" not in env
    assert env["HUB_LOADER_REGISTRY_URL"] == "http://127.0.0.1:8080"
    assert env["HUB_LOADER_REGISTRY_KEY"] == PARENT["HUB_LOADER_REGISTRY_KEY"]
    assert env["HUB_LOADER_METASTORE_PASSWORD"] == "metastore-pw"
    assert env["AWS_SECRET_ACCESS_KEY"] == "s3a-credentials"  # not a hub secret: passes


def test_the_loader_uses_its_own_key_when_no_registry_key_is_set() -> None:
    parent = {k: v for k, v in PARENT.items() if k != "HUB_LOADER_REGISTRY_KEY"}

    assert _env("loader", parent)["HUB_LOADER_REGISTRY_KEY"] == "hub_abcdef012345_loader-key"


def test_the_analyst_server_gets_the_metastore_but_no_key_nor_database_url() -> None:
    env = _env("analyst server")

    assert env["HUB_LOADER_METASTORE_URL"] == PARENT["HUB_LOADER_METASTORE_URL"]
    for absent in ("HUB_REGISTRY_DATABASE_URL", "HUB_LOADER_REGISTRY_KEY", "HUB_API_KEY"):
        assert absent not in env


def test_the_analyst_server_checks_logins_with_the_local_api() -> None:
    assert _env("analyst server")["HUB_ANALYST_API_URL"] == "http://127.0.0.1:8080"


def test_every_child_of_hub_up_has_a_secrets_list() -> None:
    assert set(CHILD_SECRETS) == {"API server", "loader", "analyst server"}


def test_the_api_and_the_loader_get_the_kafka_login_and_the_analyst_server_does_not() -> None:
    parent = {**PARENT, "HUB_KAFKA_SASL_PASSWORD": "kafka-pw", "HUB_KAFKA_SSL_KEY_PASSWORD": "k"}
    for child in ("API server", "loader"):
        env = _env(child, parent)
        assert env["HUB_KAFKA_SASL_PASSWORD"] == "kafka-pw"
        assert env["HUB_KAFKA_SSL_KEY_PASSWORD"] == "k"
    analyst = _env("analyst server", parent)
    assert "HUB_KAFKA_SASL_PASSWORD" not in analyst
    assert "HUB_KAFKA_SSL_KEY_PASSWORD" not in analyst


def test_the_loader_and_the_analyst_server_get_the_object_storage_keys_and_the_api_does_not() -> (
    None
):
    for child in ("loader", "analyst server"):
        env = _env(child)
        assert env["HUB_LOADER_S3_ACCESS_KEY"] == "hub-loader"
        assert env["HUB_LOADER_S3_SECRET_KEY"] == "s3-secret-key"
    assert "HUB_LOADER_S3_SECRET_KEY" not in _env("API server")


def test_the_loader_and_the_api_alone_get_the_runs_control_token_and_where_to_use_it() -> None:
    from hub_cli.stack import LoaderControl
    from spark_loaders.settings import LoaderSettings

    first = LoaderControl.new(LoaderSettings(health_port=None))
    second = LoaderControl.new(LoaderSettings(health_port=8091))
    assert first.token != second.token and len(first.token) >= 40  # a fresh token per run
    assert second.url == "http://127.0.0.1:8091" and first.port > 0
    assert first.token not in repr(first)  # never in a log line that shows the settings

    def env(name: str) -> dict[str, str]:
        return child_env(
            name,
            parent={**PARENT, "HUB_LOADER_CONTROL_TOKEN": "operators-token"},
            bootstrap_servers="127.0.0.1:9092",
            api_url="http://127.0.0.1:8080",
            loader_key="hub_abcdef012345_loader-key",
            loader_control=second,
        )

    loader, api, analyst = env("loader"), env("API server"), env("analyst server")
    assert loader["HUB_LOADER_CONTROL_TOKEN"] == second.token
    assert loader["HUB_LOADER_HEALTH_PORT"] == "8091"
    assert api["HUB_API_LOADER_URL"] == "http://127.0.0.1:8091"
    assert api["HUB_API_LOADER_TOKEN"] == second.token
    assert "HUB_LOADER_CONTROL_TOKEN" not in api
    assert second.token not in analyst.values()
    assert "operators-token" not in analyst.values()
