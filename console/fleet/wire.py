"""One request/response channel to an agent: newline JSON over any asyncio stream (see agents.protocol).

A channel carries one request at a time, so a slow command never queues behind ingest: the link opens a
channel per concurrent user over the same SSH connection (streamlocal channels are cheap).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any, TypeVar, overload

from agents.protocol import OPS, ProtocolError, decode, encode
from console.errors import Refused
from console.fleet.replyjson import loads

R = TypeVar("R")


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


def declared(op: str, answer: type[Any]) -> None:
    """Refuse to read ``op``'s result as a TypedDict the contract does not declare for it (``dict``: any op's
    JSON as it came): a mismatch is a bug on this side, told before anything is sent."""
    spec = OPS.get(op)
    if answer is not dict and (spec is None or spec.result is not answer):
        said = spec.result.__name__ if spec else "nothing (no such op)"
        raise TypeError(f"the contract declares {said} as the result of {op}, not {answer.__name__}")


class AgentChannel:
    def __init__(self, reader: Any, writer: Any):
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()

    @overload
    async def call(
        self,
        op: str,
        args: Mapping[str, object] | None = None,
        *,
        command_id: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]: ...

    @overload
    async def call(
        self,
        op: str,
        args: Mapping[str, object] | None = None,
        *,
        answer: type[R],
        command_id: str | None = None,
        timeout: float = 30.0,
    ) -> R: ...

    async def call(
        self,
        op: str,
        args: Mapping[str, object] | None = None,
        *,
        answer: type[Any] = dict,
        command_id: str | None = None,
        timeout: float = 30.0,
    ) -> Any:
        """Send one request and wait for its answer; AgentError on ``ok: false``. The result is read as
        ``answer``, the TypedDict agents.protocol ``OPS`` declares for ``op`` (by default any op's JSON).

        It is not checked against it again: the box runs the agent this console pushed, from the same
        contract, and an ``events`` result is checked event by event at ingest (a bad event is quarantined
        alone, never fails its reply).
        """
        declared(op, answer)
        return await self._exchange(op, args, command_id or new_id(op), timeout)

    async def _exchange(
        self, op: str, args: Mapping[str, object] | None, request_id: str, timeout: float
    ) -> Any:
        """One request out, its answer's result object back: JSON shaped as the op's (``answer`` names it)."""
        async with self._lock:
            self._writer.write(encode({"id": request_id, "op": op, "args": dict(args or {})}))
            async with asyncio.timeout(timeout):
                await self._writer.drain()
                while True:
                    try:
                        line = await self._reader.readuntil(b"\n")
                    except asyncio.IncompleteReadError as exc:
                        raise ChannelClosed(f"the agent channel closed while waiting for {op}") from exc
                    message = decode(line, loads)
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
