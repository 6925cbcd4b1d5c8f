"""Version-agnostic request and response types the coordinator core speaks. The wire server converts
kio's per-version entities to and from these; the simulator builds them directly."""
