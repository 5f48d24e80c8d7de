"""Settings of `hub up`, the local stack (environment prefix `HUB_UP_`)."""

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class StackSettings(BaseSettings):
    """How `hub up` restarts a part that exited, and how long it lets a part stop."""

    model_config = SettingsConfigDict(env_prefix="HUB_UP_", extra="ignore")

    restart_initial_seconds: float = Field(
        default=1.0,
        ge=0,
        description="Wait before the first restart of a part (the loader, the API server, the "
        "analyst server) that exited; each further failure in a row doubles it.",
    )
    restart_max_seconds: float = Field(
        default=60.0, gt=0, description="Longest wait between two restarts of a failing part."
    )
    restart_jitter_seconds: float = Field(
        default=1.0,
        ge=0,
        description="Random extra wait, up to this, added to each restart wait.",
    )
    healthy_seconds: float = Field(
        default=60.0,
        gt=0,
        description="A part that ran this long before it exited counts as healthy: its restart "
        "waits start again from restart_initial_seconds.",
    )
    stop_grace_seconds: float = Field(
        default=120.0,
        gt=0,
        description="How long a part may take to stop after SIGTERM (the loader finishes its "
        "running batch) before it and its own processes are killed.",
    )

    @model_validator(mode="after")
    def _initial_within_max(self) -> "StackSettings":
        if self.restart_initial_seconds > self.restart_max_seconds:
            raise ValueError(
                f"HUB_UP_RESTART_INITIAL_SECONDS ({self.restart_initial_seconds}) is more than "
                f"HUB_UP_RESTART_MAX_SECONDS ({self.restart_max_seconds})"
            )
        return self
