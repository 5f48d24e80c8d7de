"""Compatibility levels and modes, per subject and for the whole registry: their names as a
request gives them, and the rows that hold them."""

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_core.database import transaction
from registry.errors import InvalidCompatibilityLevel, InvalidMode
from registry.tables import ConfigRow
from registry.types import CompatibilityMode, RegistryMode, Subject

# The registry-wide row; subjects are never empty, so it cannot clash with one.
_GLOBAL = ""


def parse_compatibility(text: str) -> CompatibilityMode:
    """A compatibility level by name; 42203 listing the valid names otherwise."""
    try:
        return CompatibilityMode(text.upper())
    except ValueError:
        valid = ", ".join(m.value for m in CompatibilityMode)
        raise InvalidCompatibilityLevel(
            f"Invalid compatibility level '{text}'. Valid values are: {valid}."
        ) from None


def parse_mode(text: str) -> RegistryMode:
    """A mode by name; 42204 listing the valid names otherwise."""
    try:
        return RegistryMode(text.upper())
    except ValueError:
        valid = ", ".join(m.value for m in RegistryMode)
        raise InvalidMode(f"Invalid mode '{text}'. Valid values are: {valid}.") from None


@dataclass(frozen=True, slots=True)
class Config:
    """What is configured at one level; None means not configured there."""

    compatibility: CompatibilityMode | None = None
    mode: RegistryMode | None = None


class ConfigStore:
    """Reads and writes configuration rows; `subject=None` is the registry-wide level."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def get(self, *, subject: Subject | None) -> Config:
        """The configuration set at exactly this level."""
        return self.levels(subject=subject)[0]

    def levels(self, *, subject: Subject | None) -> tuple[Config, Config]:
        """(what is set for `subject`, what is set registry-wide), read in one query."""
        keys = {subject or _GLOBAL, _GLOBAL}
        with transaction(self._sessions) as session:
            rows = {
                r.subject: r
                for r in session.scalars(select(ConfigRow).where(ConfigRow.subject.in_(keys)))
            }
        return _config(rows.get(subject or _GLOBAL)), _config(rows.get(_GLOBAL))

    def set_compatibility(
        self, *, subject: Subject | None, compatibility: CompatibilityMode | None
    ) -> None:
        """Set (or with None, clear) the compatibility level at this level."""
        self._update(subject, compatibility=compatibility.value if compatibility else None)

    def set_mode(self, *, subject: Subject | None, mode: RegistryMode | None) -> None:
        """Set (or with None, clear) the mode at this level."""
        self._update(subject, mode=mode.value if mode else None)

    def _update(self, subject: Subject | None, **values: str | None) -> None:
        with transaction(self._sessions) as session:
            key = subject or _GLOBAL
            row = session.get(ConfigRow, key, with_for_update=True)
            if row is None:
                if all(value is None for value in values.values()):
                    return  # clearing what was never set
                row = ConfigRow(subject=key)
                session.add(row)
            for name, value in values.items():
                setattr(row, name, value)
            if row.compatibility is None and row.mode is None:
                session.delete(row)


def _config(row: ConfigRow | None) -> Config:
    if row is None:
        return Config()
    return Config(
        compatibility=CompatibilityMode(row.compatibility) if row.compatibility else None,
        mode=RegistryMode(row.mode) if row.mode else None,
    )
