"""One request/response channel to an agent: newline JSON over any asyncio stream (see agents.protocol).

A channel carries one request at a time, so a slow command never queues behind ingest: the link opens a
channel per concurrent user over the same SSH connection (streamlocal channels are cheap).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from agents.protocol import ProtocolError, decode, encode
from console.errors import Refused


class AgentError(Refused):
    """The agent answered ``ok: false``; the message is the agent's own (what, where, how to fix)."""

    def __init__(self, op: str, message: str):
        super().__init__(f"agent refused {op}: {message}")
        self.op = op
        self.reason = message


class ChannelClosed(ConnectionError):
    """The stream ended before the answer arrived: the link dropped, the request may have run or not."""


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


class AgentChannel:
    def __init__(self, reader: Any, writer: Any):
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()

    async def call(
        self,
        op: str,
        args: dict[str, Any] | None = None,
        *,
        command_id: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        """Send one request and wait for its answer; AgentError on ``ok: false``."""
        request_id = command_id or new_id(op)
        async with self._lock:
            self._writer.write(encode({"id": request_id, "op": op, "args": args or {}}))
            async with asyncio.timeout(timeout):
                await self._writer.drain()
                while True:
                    try:
                        line = await self._reader.readuntil(b"\n")
                    except asyncio.IncompleteReadError as exc:
                        raise ChannelClosed(f"the agent channel closed while waiting for {op}") from exc
                    message = decode(line)
                    if message.get("id") == request_id:
                        break
        if not message.get("ok"):
            raise AgentError(op, str(message.get("error", "no error message")))
        result = message.get("result")
        if not isinstance(result, dict):
            raise ProtocolError(f"answer to {op} has no result object: {str(message)[:120]}")
        return result

    def close(self) -> None:
        self._writer.close()
