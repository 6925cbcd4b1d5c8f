"""The assignment strategies: the plain data model, the plug-in API and registry, quality metrics, the consumer
embedded protocol codec and the balanced-sticky engine (docs/assignors.md)."""
