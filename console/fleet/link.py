"""One box's link: a supervised connection shared by ingest and commands, with reconnect and backoff.

Per box there is exactly one transport (one SSH connection). Ingest holds one agent channel and pulls in
a loop; every command opens its own channel on the same connection, so a slow command never stalls
ingest and vice versa. When the link drops, the loop backs off (exponential, full jitter, so a fleet
of boxes behind one flaky laptop link does not reconnect in lockstep) and comes back; commands waiting
for delivery are re-sent with the same id, which the agent answers from its ledger instead of re-running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, overload

import asyncssh

from agents.protocol import (
    AckResult,
    DetachResult,
    EventsArgs,
    EventsResult,
    HelloResult,
    ProtocolError,
    args_problem,
    row_event,
)
from console.backoff import Backoff
from console.errors import ConsoleError, InputError, Refused, Unreachable
from console.fleet.hostkeys import (
    DEFAULT_KNOWN_HOSTS,
    HostKeyChanged,
    HostKeyProblem,
    HostKeyUnknown,
    fetch_host_key,
    key_line,
    policy_for,
)
from console.fleet.push import (
    AgentBuild,
    AgentHome,
    AgentStartError,
    current_build,
    ensure_agent,
    resolve_home,
)
from console.fleet.transport import LocalTransport, RemoteCommandError, SshSettings, SshTransport, Transport
from console.fleet.wire import AgentChannel, AgentError, ChannelClosed, declared, new_id
from console.store import BoxNotReachable, Store, StoreFull
from console.store.errors import full_disk_guard
from console.store.ingest import IngestError, IngestReport, SequenceGap
from console.timeutil import fmt_remaining

log = logging.getLogger(__name__)
R = TypeVar("R")

LINK_ERRORS = (
    OSError,
    TimeoutError,
    asyncssh.Error,
    ChannelClosed,
    ProtocolError,
    RemoteCommandError,
    AgentStartError,
)
"""Failures that a reconnect may cure. Host-key problems and journal mismatches are not among them."""


class JournalMismatch(Unreachable):
    """The box's journal and state.db disagree about history; ingesting would skip or lose events."""


CHANNEL_RETRIES = 4
"""Channel opens refused in a row before a command treats its link as lost (and reconnects)."""
CHANNEL_BACKOFF_BASE_S = 0.4
CHANNEL_BACKOFF_CAP_S = 1.6
"""The waits between those opens (console.backoff, full jitter): at most 0.4, 0.8 and 1.6 s."""


class Detached(Refused):
    """This state.db was detached from the box's journal while its link ran: the box holds nothing for it."""


@dataclass(frozen=True)
class LinkSettings:
    ssh: SshSettings = field(default_factory=SshSettings)
    known_hosts: Path | None = DEFAULT_KNOWN_HOSTS
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 30.0
    poll_interval_s: float = 0.5
    """The least time between two pulls that found nothing (the box answered at once: nothing held for a wait)."""
    wait_s: float = 5.0
    """Caught up, the link's next pull waits on the box up to this long for its next event (``events`` with
    ``wait_ms``), so what the box journals is pulled as it is journaled rather than at a poll."""
    batch: int = 2000
    batch_bytes: int = 256 * 1024
    """A batch is bounded by bytes too: an 8-GPU sample is ~1.6 kB. Its reply is decoded in one ``json.loads``
    that holds the interpreter lock throughout (~16 ms at 1 MiB on this machine), and the Live view's reads
    wait on it: at 256 KiB the 8-GPU Live redraw's p99 while a 12-h backlog ingests was 22-30 ms against
    28-42 ms at 1 MiB, for ~3 % more ingest time (bench/tui_ingest.py, bench/ingest.py; README)."""
    agent_timeout_s: float = 30.0
    agent_tick_s: float = 1.0
    """The tick of an agent this link starts: GPU and server samples at 1 Hz, and how soon the agent sees a
    launch serve or end, a job finish or a timer come due. Tests tick faster (testbed/fleet_fixtures.py)."""


def _abandon(pending: asyncio.Future[Any] | None, acking: asyncio.Future[int] | None) -> None:
    """A drain's requests still in flight when it ends: a prefetch is dropped; an ack not yet answered is
    cancelled (the box keeps those events and sends them again, and they are skipped); a finished ack's
    failure is retrieved, since the drain ended on its own error already."""
    if pending is not None:
        pending.cancel()
    if acking is not None and not acking.done():
        acking.cancel()
    elif acking is not None and not acking.cancelled():
        acking.exception()


class BoxLink:
    def __init__(
        self,
        store: Store,
        name: str,
        settings: LinkSettings | None = None,
        *,
        build: Callable[[], AgentBuild] = current_build,
        rng: random.Random | None = None,
    ):
        self.store = store
        self.name = name
        self.settings = settings or LinkSettings()
        self._build = build
        self._rng = rng or random.Random()
        self._transport: Transport | None = None
        self._home: AgentHome | None = None
        self._up = asyncio.Event()
        self._fatal: Exception | None = None
        self._inflight: set[str] = set()
        self._closing = False
        self.last_hello: HelloResult | None = None
        """The agent's hello on the last connect (None before one)."""
        self.box_last_seq = 0
        """The newest seq the box has journaled, as of the last pull: with the cursor, the backlog."""
        self._committed = asyncio.Event()
        """Set (and replaced) each time a batch of this box's events is committed: ``next_commit`` waits on it."""
        self.on_ingest: Callable[[IngestReport], None] | None = None
        self.on_status: Callable[[str, str | None], None] | None = None
        """Told every status the link records."""
        self.on_retry: Callable[[str, str], None] | None = None
        """Told each failed attempt, once, with its status and the line that says why and when the link retries
        (``--follow`` prints them as they happen)."""
        self._store_full: StoreFull | None = None

    # -- status ----------------------------------------------------------------------------------
    def _status(self, status: str, detail: str | None) -> None:
        self._record(status=status, status_detail=detail)
        if self.on_status is not None:
            self.on_status(status, detail)

    def _record(self, **values: Any) -> None:
        """Update the box row, if the disk lets it: on a full disk ingest stops with StoreFull, not here."""
        try:
            with full_disk_guard(self.store.path):
                self.store.boxes.update(self.name, **values)
        except StoreFull:
            pass

    @property
    def consumer(self) -> str:
        """Who this state.db is to the box's journal (its campaign id)."""
        return self.store.ingest.consumer_id()

    # -- connecting ------------------------------------------------------------------------------
    async def _open_transport(self) -> Transport:
        box = self.store.boxes.get(self.name)
        if box.is_local:
            return LocalTransport()
        host, port = box.ssh_address()
        policy = policy_for(box, self.settings.known_hosts)
        if policy is None:
            key = await fetch_host_key(host, port, self.settings.ssh.connect_timeout)
            problem = HostKeyUnknown(self.name, key.get_fingerprint())
            self.store.boxes.update(
                self.name,
                host_key=key_line(key),
                host_key_source="pending",
                status="host-key-unknown",
                status_detail=str(problem),
            )
            raise problem
        try:
            transport = await SshTransport.connect(box, policy, self.settings.ssh)
        except HostKeyChanged as exc:
            self._status("host-key-changed", str(exc))
            raise
        if policy.source == "known_hosts_file":
            # Remember it: a later edit of ~/.ssh/known_hosts must not silently re-key a box mid-campaign.
            self.store.boxes.update(
                self.name, host_key=transport.host_key_line(), host_key_source="known_hosts"
            )
        return transport

    async def connect(self) -> str:
        """One attempt: transport, the right agent, a hello that agrees with state.db. Returns what was done."""
        box = self.store.boxes.get(self.name)
        if not box.reachable:  # imported figures or a destroyed box: keep its status, say why
            raise BoxNotReachable(self.name, box.unreachable_why)
        self._status("connecting", None)
        transport: Transport | None = None
        try:
            transport = await self._open_transport()
            box = self.store.boxes.get(self.name)
            home = await resolve_home(transport, box.agent_home)
            python = sys.executable if box.is_local else "python3"
            _, action = await ensure_agent(
                transport,
                home,
                self._build(),
                python,
                self.settings.agent_timeout_s,
                self.settings.agent_tick_s,
            )
            hello = await self._register(transport, home)
            self._check_journal(int(hello.get("last_seq") or 0))
        except BaseException as exc:
            if transport is not None:
                transport.close()
            if isinstance(exc, LINK_ERRORS):
                self._status("down", f"{type(exc).__name__}: {exc}")
            raise
        self._transport, self._home, self.last_hello = transport, home, hello
        self.box_last_seq = int(hello.get("last_seq") or 0)
        self._record(agent_version=hello.get("version"), tz=hello.get("tz"), last_seen_ms=self.store.clock())
        registered = hello.get("consumer")
        attached = " (this state.db attached now)" if registered and registered.get("new") else ""
        self._status(
            "up", f"agent {hello.get('version')} ({action}), journal at seq {hello.get('last_seq')}{attached}"
        )
        self._up.set()
        return action

    async def _register(self, transport: Transport, home: AgentHome) -> HelloResult:
        """Hello as this state.db's consumer: the box holds every event from now on until this one acks it."""
        channel = await transport.open_channel(home.socket)
        try:
            label = f"{socket.gethostname()}:{self.store.path.resolve()}"
            return await channel.call(
                "hello",
                {"consumer": self.consumer, "label": label},
                answer=HelloResult,
                timeout=self.settings.agent_timeout_s,
            )
        finally:
            channel.close()

    def _check_journal(self, last: int) -> None:
        """Refuse a box whose journal ends (``last``, its hello's last_seq) before what state.db committed."""
        cursor = self.store.ingest.cursor(self.name)
        if cursor > last:
            problem = JournalMismatch(
                f"box {self.name}: its journal ends at seq {last} but state.db committed up to seq {cursor}: the "
                "agent home was wiped or this is another machine under the same name; nothing was ingested. "
                f"Add it under a new name (`campaign box add`) to keep both histories"
            )
            self._status("journal-mismatch", str(problem))
            raise problem
        # A cursor behind the oldest event the box holds (a consumer released under its disk floor, a journal
        # edited by hand) is not refused: ingest records those seqs as lost (console/store/ingest.py).

    def _lost(self, exc: BaseException, status: str = "down") -> None:
        self._up.clear()
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if not self._closing:
            self._status(
                status, str(exc) if isinstance(exc, ConsoleError) else f"{type(exc).__name__}: {exc}"
            )

    # -- the supervised loop ---------------------------------------------------------------------
    async def run(self) -> None:
        """Connect, ingest and re-send commands until closed; reconnect with backoff on any link failure."""
        backoff = Backoff(self.settings.backoff_base_s, self.settings.backoff_cap_s, self._rng)
        while not self._closing:
            status = await self._attempt(backoff)
            if status is None or self.closing():  # close() may have run while this attempt awaited
                return
            delay = backoff.next()
            box = self.store.boxes.get(self.name)
            detail = f"{box.status_detail or 'link lost'}; retry in {fmt_remaining(int(delay * 1000))}"
            self._status(status, detail)
            if self.on_retry is not None:
                self.on_retry(status, detail)
            await asyncio.sleep(delay)

    async def _attempt(self, backoff: Backoff) -> str | None:
        """One connection's life, to its end: the status to retry under, or None when the link must stop
        (a problem the operator must fix, kept in ``fatal``)."""
        try:
            await self.connect()
            backoff.reset()
            self._resend_unfinished()
            await self._ingest_forever()
        except (HostKeyProblem, JournalMismatch, BoxNotReachable) as exc:
            self._fatal = exc  # the operator must act; retrying would only hammer the box
            return None
        except Detached as exc:
            self._fatal = exc
            self._lost(exc, "detached")
            return None
        except StoreFull as exc:
            # Nothing of the batch was acked, so the box keeps it all: retry until space returns.
            if self._store_full is None:
                log.warning("box %s: %s", self.name, exc)
            self._store_full = exc
            self._lost(exc, "store-full")
            return "store-full"
        except IngestError as exc:
            # A stream ingest cannot commit as it came: the cursor stays put (nothing is skipped), the
            # operator is told, and the link asks again after a backoff.
            self._lost(exc, "ingest-error")
            self._status("ingest-error", f"{exc}; the box journal is kept, nothing was skipped")
            return "ingest-error"
        except (*LINK_ERRORS, Refused) as exc:  # Refused: the agent refused the link's own hello/events/ack
            self._lost(exc)
        except Exception as exc:  # never end silently: a link that stops must say why and try again
            log.exception("box %s: the link failed unexpectedly", self.name)
            self._lost(exc)
        return "down"

    async def _ingest_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closing:
            began = loop.time()
            if await self._drain(wait_ms=round(self.settings.wait_s * 1000)) == 0:
                await asyncio.sleep(self.settings.poll_interval_s - (loop.time() - began))

    async def _drain(self, wait_ms: int = 0) -> int:
        """Pull until the box has nothing newer; returns the events inserted. ``wait_ms``: the first pull waits
        on the box that long for an event, if none is held yet (``LinkSettings.wait_s``).

        Each batch is committed (rows + cursor in one transaction) BEFORE it is acked. The next batch is
        requested on a second channel before the current one is committed, so the agent reads and SSH
        carries batch n+1 while SQLite writes batch n; a failed commit (a full disk) discards the prefetch
        and nothing of it is acked, so the next drain starts again from the committed cursor. The ack of
        batch n goes on its own channel and is awaited only before the next ack (one at a time, in order) or
        the drain's end: the box releasing acked rows never holds up the commit of the next batch.
        """
        assert self._transport is not None and self._home is not None
        fetch = await self._transport.open_channel(self._home.socket)
        try:
            ack = await self._transport.open_channel(self._home.socket)
        except BaseException:
            fetch.close()  # never left to the garbage collector: console/tui/actions.py says why
            raise
        pending: asyncio.Future[EventsResult] | None = None
        acking: asyncio.Future[int] | None = None
        acked = 0  # the cursor the box has confirmed in this drain
        total = 0
        consumer = self.consumer
        asked_again = False  # a gap is asked for once more before it is recorded as lost
        try:
            after = self.store.ingest.cursor(self.name)
            pending = asyncio.ensure_future(
                fetch.call(
                    "events",
                    self._pull_args(after, consumer, wait_ms),
                    answer=EventsResult,
                    timeout=self.settings.ssh.command_timeout + wait_ms / 1000,
                )
            )
            while True:
                answer = await pending
                pending = None
                events, texts = self._events_of(answer, after)
                if not events:
                    if acking is not None:
                        acked = await acking
                    await self._repeat_lost_ack(ack, max(acked, int(answer.get("acked_seq") or 0)), consumer)
                    return total
                pending = asyncio.ensure_future(
                    fetch.call("events", self._pull_args(events[-1]["seq"], consumer), answer=EventsResult)
                )
                await asyncio.sleep(0)  # the request goes out now, so the box reads while this side commits
                report = self._commit(events, texts, accept_gap=asked_again)
                if report is None:  # a gap: ask the box once more from the cursor
                    asked_again = True
                    pending.cancel()
                    after = self.store.ingest.cursor(self.name)
                    pending = asyncio.ensure_future(
                        fetch.call("events", self._pull_args(after, consumer), answer=EventsResult)
                    )
                    continue
                asked_again = False
                after = report.cursor
                total += report.inserted
                if self.on_ingest is not None:  # committed: said before the ack, which a stop can cancel
                    self.on_ingest(report)
                self._committed.set()
                self._committed = asyncio.Event()
                if acking is not None:
                    acked = await acking
                acking = asyncio.ensure_future(self._ack(ack, report.cursor, consumer))
        finally:
            _abandon(pending, acking)
            fetch.close()
            ack.close()

    def _events_of(self, answer: EventsResult, after: int) -> tuple[list[Any], list[str | None]]:
        """The events of one ``events`` answer, asked as ``rows``, and their texts (agents/protocol.py
        ``row_event``); Detached when the box holds nothing for this state.db. Each is still unchecked:
        ingest checks them against the contract."""
        if answer.get("registered") is False:
            raise self._detached(after)
        self.box_last_seq = int(answer.get("last_seq") or 0)
        read = [row_event(row) for row in answer.get("rows") or []]
        return [event for event, _ in read], [text for _, text in read]

    async def _repeat_lost_ack(self, ack: AgentChannel, acked: int, consumer: str) -> None:
        """The ack of a committed batch was lost with a link (the box has confirmed only ``acked``): repeat it,
        or the box keeps those events (and their disk) until something new arrives."""
        cursor = self.store.ingest.cursor(self.name)
        if acked < cursor:
            await self._ack(ack, cursor, consumer)

    def _commit(self, events: list[Any], texts: list[str | None], accept_gap: bool) -> IngestReport | None:
        """Commit one batch; None for a gap in the sequence not yet asked for again (it is, then recorded)."""
        try:
            report = self.store.ingest.batch(self.name, events, texts=texts, accept_gap=accept_gap)
        except SequenceGap as gap:
            if accept_gap:
                raise
            log.warning("box %s: %s; asking the box again", self.name, gap)
            return None
        except StoreFull as exc:
            self._status("store-full", str(exc))  # if even that fits: the one line says what to do
            raise
        if self._store_full is not None:
            log.warning("box %s: state.db has space again; ingest resumed", self.name)
            self._store_full = None
        return report

    def _pull_args(self, after: int, consumer: str, wait_ms: int = 0) -> EventsArgs:
        return {
            "after": after,
            "limit": self.settings.batch,
            "max_bytes": self.settings.batch_bytes,
            "consumer": consumer,
            "rows": True,
            "wait_ms": wait_ms,
        }

    async def _ack(self, channel: AgentChannel, seq: int, consumer: str) -> int:
        """Ack ``seq``; the box's acked seq for this state.db after it."""
        answer = await channel.call("ack", {"seq": seq, "consumer": consumer}, answer=AckResult)
        if answer.get("registered") is False:
            raise self._detached(seq)
        return int(answer.get("acked_seq") or seq)

    def _detached(self, seq: int) -> Detached:
        return Detached(
            f"box {self.name}: this state.db was detached from the box's journal while its link ran (seq {seq} "
            "and later are not held for it)",
            f"`campaign box connect {self.name}` attaches it again",
        )

    async def detach(self) -> DetachResult:
        """Ingest what is pending, then unregister this state.db from the box's journal: the box stops
        holding events for it. ``campaign box connect`` attaches it again (owed only what is still held)."""
        await self.sync()
        result = await self.command("detach", {"consumer": self.consumer}, answer=DetachResult)
        cursor = self.store.ingest.cursor(self.name)
        self._status(
            "detached",
            f"detached from the box journal after seq {cursor}; `campaign box connect "
            f"{self.name}` attaches it again",
        )
        return result

    async def sync(self) -> int:
        """Ingest until caught up with the box (one connection, no reconnect); returns events inserted."""
        if self._transport is None:
            await self.connect()
        resent = self._resend_unfinished()
        inserted = await self._drain()
        await asyncio.gather(*resent, return_exceptions=True)  # their outcome is in the store either way
        return inserted

    # -- commands --------------------------------------------------------------------------------
    @overload
    async def command(
        self, op: str, args: Mapping[str, object], *, command_id: str | None = None, timeout: float = 60.0
    ) -> dict[str, Any]: ...

    @overload
    async def command(
        self,
        op: str,
        args: Mapping[str, object],
        *,
        answer: type[R],
        command_id: str | None = None,
        timeout: float = 60.0,
    ) -> R: ...

    async def command(
        self,
        op: str,
        args: Mapping[str, object],
        *,
        answer: type[Any] = dict,
        command_id: str | None = None,
        timeout: float = 60.0,
    ) -> Any:
        """Store the command, then deliver it (re-sending the same id across reconnects) and return the result,
        read as ``answer``: the TypedDict agents.protocol ``OPS`` declares for ``op`` (by default any op's JSON;
        AgentChannel.call says why it is not checked again)."""
        declared(op, answer)
        problem = args_problem(op, args)
        if problem is not None:  # the contract refuses it here, before anything is stored or sent
            raise InputError(
                f"box {self.name}: {problem}", "nothing was stored or sent; give a value in range"
            )
        command_id = command_id or new_id(op)
        self.store.commands.add(command_id, self.name, op, args)
        return await self._deliver(command_id, op, args, timeout, answer)

    async def _deliver(
        self, command_id: str, op: str, args: Mapping[str, object], timeout: float, answer: type[R]
    ) -> R:
        self._inflight.add(command_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        refused = 0  # channel opens the box refused in a row, on a connection that is otherwise up
        retry = Backoff(CHANNEL_BACKOFF_BASE_S, CHANNEL_BACKOFF_CAP_S, self._rng)
        try:
            while True:
                try:
                    transport, home = await self._wait_up(deadline - loop.time())
                except TimeoutError as exc:
                    raise self._undelivered(command_id, op) from exc
                try:
                    result = await self._send(
                        transport, home, command_id, op, args, deadline - loop.time(), answer
                    )
                except AgentError as exc:
                    self.store.commands.finish(command_id, False, error=exc.reason)
                    raise
                except asyncssh.ChannelOpenError as exc:
                    if deadline - loop.time() <= 0:
                        raise self._undelivered(command_id, op) from exc
                    refused = await self._channel_refused(
                        exc, transport, refused + 1, retry, deadline - loop.time()
                    )
                    continue
                except LINK_ERRORS as exc:
                    if loop.time() >= deadline:
                        raise self._undelivered(command_id, op) from exc
                    if self._transport is transport:
                        self._lost(exc)
                    continue
                self.store.commands.finish(command_id, True, result)
                return result
        finally:
            self._inflight.discard(command_id)

    async def _channel_refused(
        self, exc: asyncssh.ChannelOpenError, transport: Transport, refused: int, retry: Backoff, left: float
    ) -> int:
        """The connection is up but this channel was refused: the agent's socket was momentarily full (a
        sweep's replicas open many at once) or the agent is restarting. Wait a little and try again on the
        same connection; only CHANNEL_RETRIES refusals in a row mean the link is lost. Returns the count of
        refusals in a row so far (0 after the link was given up)."""
        if refused < CHANNEL_RETRIES:
            await asyncio.sleep(min(left, retry.next()))
            return refused
        retry.reset()
        if self._transport is transport:
            self._lost(exc)
        return 0

    async def _send(
        self,
        transport: Transport,
        home: AgentHome,
        command_id: str,
        op: str,
        args: Mapping[str, object],
        left: float,
        answer: type[R],
    ) -> R:
        """One delivery on a channel of its own, marked sent before the request leaves."""
        channel = await transport.open_channel(home.socket)
        try:
            self.store.commands.mark_sent(command_id)
            return await channel.call(op, args, answer=answer, command_id=command_id, timeout=max(0.1, left))
        finally:
            channel.close()

    async def _wait_up(self, timeout: float) -> tuple[Transport, AgentHome]:
        """The live transport, waiting up to ``timeout`` for a reconnect; fatal problems raise at once."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if self._fatal is not None:
                raise self._fatal
            if self._transport is not None and self._home is not None and self._up.is_set():
                return self._transport, self._home
            left = deadline - loop.time()
            if left <= 0:
                box = self.store.boxes.get(self.name)
                raise TimeoutError(f"box {self.name} is {box.status} ({box.status_detail})")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._up.wait(), min(left, 0.5))

    def _undelivered(self, command_id: str, op: str) -> TimeoutError:
        command = self.store.commands.get(command_id)
        box = self.store.boxes.get(self.name)
        if command.state == "pending":
            self.store.commands.finish(
                command_id, False, error=f"never sent: box {self.name} was {box.status}"
            )
            return TimeoutError(f"{op} was not sent: box {self.name} is {box.status} ({box.status_detail})")
        return TimeoutError(
            f"{op} was sent to box {self.name} but its answer did not arrive ({box.status}: {box.status_detail}); "
            f"command {command_id} is re-sent on the next connection and the agent answers it from its ledger"
        )

    def _resend_unfinished(self) -> list[asyncio.Future[dict[str, Any]]]:
        """Commands a previous console stored and maybe sent: re-send to learn (not repeat) their outcome."""
        tasks: list[asyncio.Future[dict[str, Any]]] = []
        for command in self.store.commands.unfinished(self.name):
            if command.id not in self._inflight:
                task = asyncio.ensure_future(self._deliver(command.id, command.op, command.args, 60.0, dict))
                task.add_done_callback(_log_failure)
                tasks.append(task)
        return tasks

    # -- forwards and shutdown -------------------------------------------------------------------
    async def forward(self, port: int, timeout: float = 30.0) -> int:
        """A console-side port reaching ``127.0.0.1:port`` on the box."""
        transport, _ = await self._wait_up(timeout)
        return await transport.forward(port)

    @property
    def connected(self) -> bool:
        return self._transport is not None and self._up.is_set()

    @property
    def fatal(self) -> Exception | None:
        return self._fatal

    def closing(self) -> bool:
        return self._closing

    async def next_commit(self, timeout_s: float) -> None:
        """Until this link commits its next batch of the box's events, or ``timeout_s`` passes: a wait for
        something the box journals wakes when it lands in state.db, not at its next poll."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._committed.wait(), timeout_s)

    async def close(self) -> None:
        self._closing = True
        self._up.clear()
        if self._transport is not None:
            self._transport.close()
            self._transport = None


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("re-sent command failed: %s", task.exception())
