import json
import logging

import pytest

from hub_cli.logs import configure_logging, redact

pytestmark = pytest.mark.unit


def test_api_keys_and_url_passwords_are_masked() -> None:
    line = (
        "key hub_a1b2c3d4e5f6_Zx9-secretSECRETsecret used on postgresql+psycopg://hub:pa55@db/hub"
    )
    assert redact(line) == "key hub_a1b2c3d4e5f6_*** used on postgresql+psycopg://hub:***@db/hub"


def test_the_consoles_cookies_are_masked() -> None:
    line = "Cookie: hub_console_session=Zx9-secretSECRETsecret; hub_console_form=abc_DEF-123"
    assert redact(line) == "Cookie: hub_console_session=***; hub_console_form=***"


def test_json_logs_are_one_object_per_line_without_secrets(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HUB_LOG_FORMAT", "json")
    configure_logging()
    logging.getLogger("hub.test").warning("token %s", "hub_0123456789ab_verysecretvalue")
    entry = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert entry["level"] == "WARNING" and entry["logger"] == "hub.test"
    assert entry["message"] == "token hub_0123456789ab_***"


def _log_a_failed_connection() -> None:
    try:
        raise ConnectionError(
            "cannot reach postgresql+psycopg://hub:s3cr%40t@db/hub "
            "(host=db password=hunter2 user=hub), key hub_0123456789ab_verysecretvalue"
        )
    except ConnectionError:
        logging.getLogger("hub.test").exception("the database is away")


SECRETS = ("s3cr%40t", "hunter2", "verysecretvalue")


def test_text_logs_mask_secrets_in_tracebacks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HUB_LOG_FORMAT", "text")
    configure_logging()

    _log_a_failed_connection()

    err = capsys.readouterr().err
    assert "Traceback" in err and "ConnectionError: cannot reach" in err
    assert "postgresql+psycopg://hub:***@db/hub" in err and "password=***" in err
    assert not [s for s in SECRETS if s in err]


def test_json_logs_mask_secrets_in_tracebacks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HUB_LOG_FORMAT", "json")
    configure_logging()

    _log_a_failed_connection()

    entry = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert entry["message"] == "the database is away"
    assert "ConnectionError: cannot reach" in entry["error"]
    assert "hub:***@db/hub" in entry["error"] and "hub_0123456789ab_***" in entry["error"]
    assert not [s for s in SECRETS if s in entry["error"]]


def test_a_password_holding_an_at_sign_is_masked_whole() -> None:
    assert redact("postgresql://hub:p@ss@db/hub") == "postgresql://hub:***@db/hub"
