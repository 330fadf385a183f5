"""The smallest honest "server" for the agent's kill-frees-the-GPU test: a torch process holding GPU memory.

Why: agents/supervisor.py calls a launch ready when ``/health`` and ``/v1/models`` both answer 200 (vLLM's
API server up and its model loaded), and after a kill it journals ``gpu_released`` from the GPU readings.
A real vLLM is not needed to test that path, only a process that holds memory the way an engine does. So
this one allocates (and writes) ``--gib`` GiB on its CUDA device first, then answers exactly those two
paths; ``/metrics`` and the rest are 404, since it serves nothing. Started by the supervisor as
``python gpu_holder.py --port P --gib 16``; it runs until it is signalled (SIGTERM's default action ends it).
Needs torch with CUDA; standard library otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--gib", type=float, default=16.0)
    ap.add_argument("--model", default="gpu-holder")
    ns = ap.parse_args()

    import torch

    t0 = time.monotonic()
    held = torch.zeros(
        int(ns.gib * (1 << 30)), dtype=torch.uint8, device="cuda"
    )  # written, not just reserved
    torch.cuda.synchronize()
    print(
        f"gpu_holder: holding {held.numel() / (1 << 30):.1f} GiB on cuda:{held.device.index} "
        f"({torch.cuda.get_device_name(held.device)}) after {time.monotonic() - t0:.1f} s",
        flush=True,
    )
    models = json.dumps({"object": "list", "data": [{"id": ns.model, "object": "model"}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = {"/health": b"", "/v1/models": models}.get(self.path.split("?")[0])
            self.send_response(404 if body is None else 200)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", ns.port), Handler)
    print(f"gpu_holder: serving /health and /v1/models on 127.0.0.1:{ns.port}", flush=True)
    try:
        server.serve_forever()
    finally:
        del held
        sys.stdout.flush()


if __name__ == "__main__":
    main()
