"""Conformance tests for the sans-IO group coordinator: the scenarios of docs/protocol.md, by id."""
