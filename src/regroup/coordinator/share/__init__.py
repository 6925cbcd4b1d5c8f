"""Share groups (KIP-932)."""
