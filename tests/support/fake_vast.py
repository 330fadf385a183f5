"""A local stand-in for the Vast.ai REST API: the part the hard stop uses, on 127.0.0.1.

Faked because the real API cannot be reached from tests; modelled on the Vast CLI's endpoints
(docs/facts.md, The Vast.ai REST API): ``GET/PUT/DELETE /api/v0/instances/{id}/`` with a Bearer key,
``{"instances": {...}|null}`` on show, ``{"success": false, "error": "no_such_instance"}`` for unknown
ids. Tests script faults per method (``fail(method, [429, 503])``) and how many polls a destroy or stop
takes before the instance is gone or stopped, to exercise retries and confirmation.
"""

from __future__ import annotations

import json
import re
import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_PATH = re.compile(r"^/api/v0/instances/(\d+)/(?:\?.*)?$")


@dataclass
class FakeVast:
    api_key: str
    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    settle_polls: int = 1  # GETs after a DELETE/stop before the change shows
    requests: list[tuple[str, str, bool]] = field(default_factory=list)  # (method, path, authorised)
    _faults: dict[str, deque[tuple[int, dict[str, str]]]] = field(default_factory=lambda: defaultdict(deque))
    _pending: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (change, polls left)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, instance_id: str, status: str = "running") -> None:
        self.instances[instance_id] = {
            "id": int(instance_id),
            "actual_status": status,
            "cur_state": status,
            "intended_status": status,
            "gpu_name": "RTX PRO 6000",
            "num_gpus": 4,
        }

    def fail(self, method: str, statuses: list[int], retry_after: str | None = None) -> None:
        """The next requests of ``method`` answer these statuses, in order, before the real answer."""
        headers = {"Retry-After": retry_after} if retry_after else {}
        self._faults[method].extend((s, headers) for s in statuses)

    def count(self, method: str) -> int:
        return sum(1 for m, _, _ in self.requests if m == method)

    # -- request handling (called from the server thread) -----------------------------------------
    def handle(self, method: str, path: str, auth: str | None) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self._lock:
            authorised = auth == f"Bearer {self.api_key}"
            self.requests.append((method, path, authorised))
            if not authorised:
                return 401, {"success": False, "error": "auth_error", "msg": "Invalid user key"}, {}
            if self._faults[method]:
                status, headers = self._faults[method].popleft()
                return (
                    status,
                    {"success": False, "error": "server_error", "msg": f"scripted {status}"},
                    headers,
                )
            m = _PATH.match(path)
            if not m:
                return 404, {"detail": "Not Found"}, {}
            iid = m[1]
            if method == "GET":
                self._settle(iid)
                return 200, {"instances": self.instances.get(iid)}, {}
            if iid not in self.instances:
                return (
                    404,
                    {"success": False, "error": "no_such_instance", "msg": f"Instance {iid} not found."},
                    {},
                )
            self._pending[iid] = ("destroy" if method == "DELETE" else "stop", self.settle_polls)
            return 200, {"success": True}, {}

    def _settle(self, iid: str) -> None:
        if iid not in self._pending:
            return
        change, left = self._pending[iid]
        if left > 0:
            self._pending[iid] = (change, left - 1)
            return
        del self._pending[iid]
        if change == "destroy":
            self.instances.pop(iid, None)
        else:
            self.instances[iid].update(
                actual_status="stopped", cur_state="stopped", intended_status="stopped"
            )


class _Handler(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        status, body, headers = self.server.fake.handle(  # type: ignore[attr-defined]
            self.command, self.path, self.headers.get("Authorization")
        )
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_PUT = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:  # keep the test output clean
        return


class FakeVastServer:
    """``with FakeVastServer(fake) as url:`` serves ``fake`` on an ephemeral 127.0.0.1 port."""

    def __init__(self, fake: FakeVast):
        self.fake = fake
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.fake = fake  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> str:
        self.thread.start()
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
