"""The Confluent Schema Registry REST API: subjects, versions and schemas, compatibility levels
and modes; the two reads serializers send most are answered from memory before routing."""
