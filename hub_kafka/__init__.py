"""The Kafka client: producers, topic administration, settings and the local KRaft broker.

A leaf on top of `hub_core`: it knows how to talk to Kafka, not what feeds or schemas are.
"""
