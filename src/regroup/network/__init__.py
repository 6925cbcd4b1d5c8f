"""The network shell of ``regroup serve``: listeners and their TLS, each connection's authentication (SASL
sessions, certificate principals), connections with their ordering, fairness and back-pressure, connection
admission, framing and the Kafka wire codec. It hands decoded requests to a ``connection.Responder`` (the
server's dispatcher) and writes what it answers; it knows nothing of groups, topics or the broker's APIs."""
