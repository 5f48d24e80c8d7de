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


def test_json_logs_are_one_object_per_line_without_secrets(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HUB_LOG_FORMAT", "json")
    configure_logging()
    logging.getLogger("hub.test").warning("token %s", "hub_0123456789ab_verysecretvalue")
    entry = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert entry["level"] == "WARNING" and entry["logger"] == "hub.test"
    assert entry["message"] == "token hub_0123456789ab_***"
