"""The feeds API: team-owned topics with a kind and a schema, who may read them, and the replay
of their quarantine."""
