"""GET from a server on this box, and the one test of whether it serves: the supervisor's ready check and a
tripwire client waiting for a loading launch (agents/tripwire/ready.py) must mean the same thing by it."""

from __future__ import annotations

import http.client

HTTP_TIMEOUT_S = 1.0


def http_get(
    port: int, path: str, timeout: float = HTTP_TIMEOUT_S, host: str = "127.0.0.1"
) -> tuple[int, bytes] | None:
    """GET http://host:port/path; None when nothing answers."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def serves(port: int, host: str = "127.0.0.1") -> bool:
    """The server answers both /health and /v1/models (vLLM's API server up and its model loaded)."""
    health = http_get(port, "/health", host=host)
    if health is None or health[0] != 200:
        return False
    models = http_get(port, "/v1/models", host=host)
    return models is not None and models[0] == 200
