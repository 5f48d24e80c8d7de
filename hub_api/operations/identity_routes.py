"""Who a key belongs to: a cheap authenticated check for services that accept hub keys.

The Spark Thrift Server asks it for each new login (its `HubKeyAuthenticator`), and a user can
check a key with it before using it elsewhere.
"""

from fastapi import APIRouter

from hub_api.auth import Caller
from hub_api.operations.identity_models import WhoAmIPublic

router = APIRouter(prefix="/v1", tags=["identity"])


@router.get("/whoami", response_model=WhoAmIPublic)
def whoami(caller: Caller) -> WhoAmIPublic:
    """The team of the calling key (or that it is an admin key); 401 without a valid key."""
    return WhoAmIPublic.of(caller)
