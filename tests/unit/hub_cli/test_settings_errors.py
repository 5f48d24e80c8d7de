"""Invalid settings in the environment: one line naming each variable, exit code 2."""

import pytest
from pydantic import BaseModel, ValidationError

from hub_core.settings import invalid_settings_message
from hub_kafka.settings import KafkaSettings
from spark_loaders.settings import LoaderSettings
from tests.support.cli import hub

pytestmark = pytest.mark.unit


def _error(build: type[BaseModel]) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        build()
    return caught.value


def test_the_message_names_each_variable_and_its_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUB_KAFKA_LINGER_MS", "-1")
    monkeypatch.setenv("HUB_KAFKA_DELIVERY_TIMEOUT_MS", "soon")

    message = invalid_settings_message(_error(KafkaSettings))

    assert message is not None
    assert message.startswith("Invalid settings (KafkaSettings): ")
    assert "HUB_KAFKA_LINGER_MS: Input should be greater than or equal to 0" in message
    assert "HUB_KAFKA_DELIVERY_TIMEOUT_MS: Input should be a valid integer" in message


def test_the_local_broker_needs_two_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUB_KAFKA_BROKER_PORT", "9093")

    message = invalid_settings_message(_error(KafkaSettings))

    assert message == (
        "Invalid settings (KafkaSettings): HUB_KAFKA_BROKER_PORT and HUB_KAFKA_CONTROLLER_PORT "
        "are both 9093: the local broker needs two different ports"
    )


def test_values_are_never_repeated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUB_LOADER_TRIGGER_SECONDS", "s3cr3t-looking-value")

    message = invalid_settings_message(_error(LoaderSettings))

    assert message is not None and "HUB_LOADER_TRIGGER_SECONDS" in message
    assert "s3cr3t-looking-value" not in message


def test_errors_of_other_models_are_not_taken_for_settings() -> None:
    class Request(BaseModel):
        size: int

    assert invalid_settings_message(_error(Request)) is None


def test_the_hub_command_reports_invalid_settings_with_code_42270(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HUB_KAFKA_LINGER_MS", "-1")

    result = hub("kafka", "status")

    assert result.returncode == 2
    assert "HUB_KAFKA_LINGER_MS: Input should be greater than or equal to 0" in result.stderr
    assert "(error 42270)" in result.stderr
    assert "Traceback" not in result.stderr
