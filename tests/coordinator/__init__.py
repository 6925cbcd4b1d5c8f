"""Conformance tests for the sans-IO classic group coordinator (reference doc sections 1, 3, 4 and 7)."""
