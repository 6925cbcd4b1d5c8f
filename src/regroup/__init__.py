"""regroup: Kafka consumer-group coordination as a deterministic, sans-IO Python core with thin shells."""

__version__ = "0.1.0"
