"""Plain value types shared by every layer: Kafka error codes and the typed errors the core raises."""
