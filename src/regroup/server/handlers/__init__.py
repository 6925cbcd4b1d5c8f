"""One module per family of Kafka APIs; each exposes ``SPECS: list[ApiSpec]``."""
