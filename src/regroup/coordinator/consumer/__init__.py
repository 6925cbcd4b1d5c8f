"""KIP-848 consumer groups in the coordinator core: the group model, records and replay, reconciliation, target
assignment, heartbeats, fencing and migration between the protocols (docs/architecture.md)."""
