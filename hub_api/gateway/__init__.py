"""The publish gateway: `POST /v1/feeds/{topic}/records`, served by its FastAPI route or by the
lean lane in front of the router (docs/adr/0031-lean-publish-lane.md)."""
