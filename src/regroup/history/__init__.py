"""The rebalance timeline of every group (docs/operations.md, "Rebalance timeline"): a pure fold of the
server's event-log rows (``regroup.model.eventlog``) into each group's rebalances and partition ownership
intervals, kept for a window of time. No I/O: the server hands it rows, the storage keeps them."""

from regroup.history.timeline import Timelines

__all__ = ["Timelines"]
