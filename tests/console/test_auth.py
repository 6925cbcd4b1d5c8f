"""The HTTP console of a ``regroup serve`` whose listener authenticates with SASL asks for HTTP Basic
authentication against the same users: a PLAIN user of the listener's JAAS configuration and a SCRAM user of
the credential store (``regroup users add``) get in with their passwords, anything else is a 401 that says how
to authenticate — on every path, ``/metrics`` and a replay's POST included; ``regroup groups timeline`` passes the URL's
credentials. With SASL the console may listen on an address that is not loopback."""

from __future__ import annotations

import base64
import http.client
import json
import subprocess
import sys
from pathlib import Path

from tests.console.conftest import Console
from tests.server.conftest import ServerProcess, assert_clean_log, free_port

PLAIN_PW = "plain-pw-8d41"
SCRAM_PW = "scram-pw-27ce"


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_basic_authentication_against_the_sasl_users(tmp_path: Path) -> None:
    data = tmp_path / "data"
    subprocess.run(
        [sys.executable, "-m", "regroup", "users", "add", "--data-dir", str(data), "--mechanism", "SCRAM-SHA-256",
         "--user", "alice", "--password", SCRAM_PW],
        check=True, capture_output=True,
    )  # fmt: skip
    port, http_port = free_port(), free_port()
    config = tmp_path / "server.properties"
    config.write_text(
        "\n".join(
            [
                f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
                f'PlainLoginModule required user_admin="{PLAIN_PW}";',
                "",
            ]
        )
    )
    proc = ServerProcess(
        data,
        tmp_path / "server.log",
        ["--config", str(config), "--http-port", str(http_port), "--http-host", "0.0.0.0"],
    )
    proc.port = port
    proc.start()
    try:
        console = Console(proc, http_port)
        for path in ("/api/groups", "/metrics", "/", "/api/events", "/assets/app.js"):
            status, headers, _ = console.get(path)
            assert status == 401, path
            assert headers["www-authenticate"] == 'Basic realm="regroup", charset="UTF-8"'
        for user, password in (("admin", "wrong"), ("alice", PLAIN_PW), ("nobody", SCRAM_PW), ("alice", "")):
            assert console.get("/api/groups", basic(user, password))[0] == 401, (user, password)
        assert console.get("/api/groups", {"Authorization": "Basic %%%"})[0] == 401
        for user, password in (("admin", PLAIN_PW), ("alice", SCRAM_PW), ("alice", SCRAM_PW)):  # (twice: remembered)
            status, _, body = console.get("/api/groups", basic(user, password))
            assert (status, json.loads(body)) == (200, {"groups": []}), user
        assert console.get("/metrics", basic("alice", SCRAM_PW))[0] == 200
        # a replay's POST asks for it too
        body = b'{"since_ms": 1, "until_ms": 2}'
        for headers in ({}, basic("admin", "wrong")):
            connection = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
            connection.request("POST", "/api/groups/g/replays", body=body, headers=headers)
            assert connection.getresponse().status == 401
            connection.close()
        connection = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
        connection.request("POST", "/api/groups/g/replays", body=body, headers=basic("admin", PLAIN_PW))
        assert connection.getresponse().status == 404  # (authenticated: no group g)
        connection.close()

        def timeline(url: str) -> subprocess.CompletedProcess[str]:
            argv = [sys.executable, "-m", "regroup", "groups", "timeline", "g", "--http", url]
            return subprocess.run(argv, capture_output=True, text=True, timeout=60)

        refused = timeline(f"http://127.0.0.1:{http_port}")
        assert refused.returncode == 1 and "authentication required" in refused.stderr
        unknown = timeline(f"http://alice:{SCRAM_PW}@127.0.0.1:{http_port}")
        assert (unknown.returncode, unknown.stderr) == (
            1,
            "regroup: unknown group 'g' (not in the rebalance history)\n",
        )
    finally:
        proc.kill()
    assert_clean_log(proc)
    assert PLAIN_PW not in proc.log() and SCRAM_PW not in proc.log()
