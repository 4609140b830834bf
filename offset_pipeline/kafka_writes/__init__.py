"""Kafka writes behind the resources, returning what they applied as plain data."""
