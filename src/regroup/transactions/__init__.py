"""The transaction coordinator (KIP-98): a sans-IO state machine per transactional id — producer id and
epoch, state, the partitions and groups of the ongoing transaction, its timeout — whose every change is a
record (``records.py``) applied through ``replay.py``, so the coordinator is by construction what replaying
its records gives. The shells make the records durable, write the transaction markers the results ask for
(``MarkerJob``) and tell the coordinator when they are written."""
