"""The Kafka-wire server: an asyncio shell around the sans-IO coordinator core, plus an embedded
single-node partition log so real Kafka clients can produce, consume and commit."""
