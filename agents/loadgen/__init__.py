"""The load generator the agent runs next to the servers (standard library only, Python 3.10+).

Every throughput number the console shows comes from here, so the client must never be the limit:
the hot path is a raw asyncio protocol that counts SSE events with C-speed byte scans instead of
decoding JSON per event (see ``agents.loadgen.wire``), load is spread over worker processes, and each
run measures its own CPU use and event-loop lag and says ``client_bound`` when it saturated a core.
"""

from agents.loadgen.cli import main

__all__ = ["main"]
