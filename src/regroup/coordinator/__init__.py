"""The group coordinator as a sans-IO state machine: requests plus ``now_ms`` in, responses and records
out. See ``coordinator.GroupCoordinator``."""
