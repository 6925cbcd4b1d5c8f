"""The rebalance lab (a shell): what a strategy, protocol, group size or churn pattern costs, measured over
many deterministic simulator runs distributed by PySpark, or over recorded event logs.

``grid`` reads a scenario grid and expands it into runs, ``scenarios`` turns one run into a simulator
scenario, ``metrics`` computes per-rebalance and per-run rows from an event log, ``jobs`` runs both on
Spark and writes Parquet, ``report`` renders the self-contained HTML report. See docs/lab.md.

Nothing in the core imports this package. pyspark is imported only by ``session``, ``jobs``, ``report``
and ``progress`` (inside functions or for type checking), so grids, metrics and runs work without a JVM.
"""
