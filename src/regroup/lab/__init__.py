"""The rebalance lab (a shell): what a strategy, protocol, group size or churn pattern costs, measured over
many deterministic simulator runs distributed by PySpark, or over recorded event logs.

``grid`` reads a scenario grid and expands it into runs, ``scenarios`` turns one run into a simulator
scenario, ``metrics`` computes per-rebalance and per-run rows from an event log, ``jobs`` runs both on
Spark and writes Parquet, ``report`` renders the self-contained HTML report. See docs/lab.md.

``preflight`` checks what the lab needs first (its ``lab`` extra, Java 17+), ``executor_env`` packs what a
cluster's executors need, ``failures`` turns a failed Spark job into one line.

Nothing in the core imports this package. pyspark is imported only by ``session``, ``jobs``, ``report``
and ``progress`` (inside functions or for type checking), matplotlib only by ``plots`` (which ``report``
imports), so grids, metrics and runs work without a JVM and without the ``lab`` extra.
"""
