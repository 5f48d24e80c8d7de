"""The hub's HTTP edge: the schema registry API and the publish gateway in one FastAPI app."""

from hub_api.app import create_app
from hub_api.settings import ApiSettings

__all__ = ["ApiSettings", "create_app"]
