"""`HubServices` for unit tests that mount a few routes on a bare app, without its lifespan.

A test gives the services its routes use; every other field is a stand-in that fails the test,
naming the field, as soon as anything uses it.
"""

from dataclasses import fields
from typing import Any

from fastapi import FastAPI

from hub_api.services import HubServices


class _NotGiven:
    """A service the test did not give: using it fails, naming it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        raise AssertionError(
            f"the test's app has no `{self._name}` service (asked for `.{attribute}`)"
        )


def app_services(**given: Any) -> HubServices:
    """`HubServices` with the fields given, and stand-ins for the rest."""
    names = [field.name for field in fields(HubServices)]
    unknown = sorted(set(given) - set(names))
    assert not unknown, f"HubServices has no fields {unknown}"
    return HubServices(**{name: given.get(name, _NotGiven(name)) for name in names})


def install(app: FastAPI, **given: Any) -> HubServices:
    """Keep `app_services(**given)` on `app`, as the lifespan keeps the real ones."""
    app.state.services = services = app_services(**given)
    return services
