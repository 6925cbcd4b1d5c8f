"""A fuzzer for ``regroup serve``: valid seed requests for every API and version the server advertises
(``schema``, ``values``, ``seeds``), mutations of their bytes that know where the length fields are
(``layout``, ``mutate``), and a runner that sends them over many connections while watching the server for
crashes, hangs, logged tracebacks and memory growth (``runner``; ``python -m tests.server.fuzz``). Its SASL and
TLS modes (``--sasl``, ``--tls``) run a script per connection instead (``scripted``, ``sasl``, ``tls``): an
exchange with the server mutated at every step, through a SASL_PLAINTEXT or an SSL listener."""
