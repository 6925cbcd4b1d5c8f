"""Who a client is and what it may do, as plain logic: the SASL mechanisms' server sides (PLAIN, SCRAM,
OAUTHBEARER), JAAS option parsing, principals and their mapping rules, Kafka's ACL model and the authorizer.

A core package: no sockets, clocks, threads or randomness. Time arrives as ``now_ms``; nonces come from a
source the shell injects; the shell (``server/``) owns the connections, the files and the TLS handshake."""
