"""The publish path every edge shares: `Publisher` (clean, validate, encode, produce, dead-letter),
`FeedService` (feeds with their topics and schemas), idempotent requests, the REST Proxy's
schema resolution, and `publish_services`, which wires them for the API and the connector worker.
"""
