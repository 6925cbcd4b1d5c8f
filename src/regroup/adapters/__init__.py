"""regroup's strategies inside consumers of other client libraries: ``regroup.adapters.kafka_python`` (kafka-python
3.0.12+) and ``regroup.adapters.aiokafka`` (aiokafka 0.14+) offer them as each library's partition assignors,
``regroup.adapters.common`` holds what both share. Each module needs its library (``pip install
'regroup[adapters]'`` installs both); importing one without its library raises an ImportError naming the package
(docs/assignors.md, "Using regroup's assignors from your client")."""
