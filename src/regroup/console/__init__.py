"""The operator's console of ``regroup serve``: one HTTP port (``--http-port``) serving the dashboard (``/``, its
static files under ``/assets/``), its JSON (``/api/...``), a live stream of the groups' events
(``/api/events``, Server-Sent Events) and the Prometheus metrics (``/metrics``). A shell: it reads the broker only
through the view the server hands it (``view.py``) and knows nothing of the coordinator (docs/operations.md,
"HTTP API and dashboard")."""
