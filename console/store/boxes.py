"""Box inventory: where each box is, how it is reached and which host key the operator trusted."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from console.errors import ConsoleError, InputError
from console.store.jsonutil import json_dict_or_none

if TYPE_CHECKING:
    from console.store.connection import Connection

LOCAL_BOX = "local"


@dataclass
class Box:
    name: str
    kind: str = "ssh"
    ssh_user: str | None = None
    host: str | None = None
    port: int | None = None
    key_path: str | None = None
    provider: str | None = None
    instance_id: str | None = None
    price_per_hour: float | None = None
    host_key: str | None = None
    host_key_source: str | None = None
    status: str = "new"
    status_detail: str | None = None
    agent_version: str | None = None
    tz: str | None = None
    gpu_summary: str | None = None
    created_ms: int = 0
    updated_ms: int = 0
    last_seen_ms: int | None = None
    destroyed_ms: int | None = None
    serving_env: str | None = None
    model_root: str | None = None
    agent_home: str | None = None
    serving_versions: str | None = None
    """JSON: the engine stack its serving env reported at its newest check (vllm, torch, flashinfer-python,
    -jit-cache, -cubin: console/checks/serving_env.py); None: never read. ``engine_versions`` parses it."""
    price_basis: str | None = None
    """What ``price_per_hour`` is: a cost-model basis economics prices the box on (console/economics/costs.py),
    or None: the operator's own price."""
    price_provenance: str | None = None

    @property
    def engine_versions(self) -> dict[str, str]:
        """``serving_versions`` as a dict (empty when never read)."""
        return {str(k): str(v) for k, v in (json_dict_or_none(self.serving_versions) or {}).items()}

    @property
    def is_local(self) -> bool:
        return self.kind == "local"

    @property
    def reachable(self) -> bool:
        """Whether the console can connect to it: not imported figures (``campaign demo``), not destroyed."""
        if self.is_local:
            return True
        return self.status not in ("imported", "destroyed") and self.destroyed_ms is None and bool(self.host)

    @property
    def unreachable_why(self) -> str:
        """Why the console cannot connect to it, in a few words (the provenance stays in ``status_detail``)."""
        if self.status == "imported":
            return "it holds imported figures (someone else's measurements), not a machine to connect to"
        if self.status == "destroyed" or self.destroyed_ms is not None:
            return "it was destroyed"
        return self.status_detail or f"its status is {self.status}"

    def ssh_address(self) -> tuple[str, int]:
        """(host, port) of its sshd; BoxNotReachable saying why when there is nothing to connect to."""
        if not self.reachable:
            raise BoxNotReachable(self.name, self.unreachable_why)
        if not self.host or not self.port:
            raise BoxNotReachable(
                self.name, "it has no SSH host and port recorded", "`campaign box add` it again"
            )
        return self.host, self.port

    @property
    def ssh_target(self) -> str | None:
        """``user@host[:port]``; None for a box with no SSH address (imported figures)."""
        if self.is_local:
            return "local"
        if not self.host:
            return None
        port = f":{self.port}" if self.port and self.port != 22 else ""
        return f"{self.ssh_user}@{self.host}{port}"

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Box:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})


class BoxExists(InputError, ValueError):
    def __init__(self, name: str):
        super().__init__(f"a box named {name!r} already exists", f"`campaign box rm {name}` first")


class NoSuchBox(InputError, KeyError):
    def __init__(self, name: str):
        super().__init__(f"no box named {name!r}", "`campaign box list` shows the boxes")
        self.name = name

    def __str__(self) -> str:  # KeyError would quote the message
        return ConsoleError.__str__(self)


class BoxNotReachable(NoSuchBox):
    """The box exists in the store but there is nothing to connect to (imported figures, destroyed)."""

    def __init__(
        self,
        name: str,
        why: str,
        hint: str = "its figures stay readable; `campaign box add NAME --ssh USER@HOST` adds a box you can reach",
    ):
        InputError.__init__(self, f"box {name!r} cannot be reached: {why}", hint)
        self.name = name


class Boxes:
    def __init__(self, store: Connection):
        self.store = store

    def add(self, box: Box) -> Box:
        now = self.store.clock()
        box.created_ms = box.created_ms or now
        box.updated_ms = now
        with self.store.atomic() as db:
            if db.table("boxes").count_where("name = ?", [box.name]):
                raise BoxExists(box.name)
            db.table("boxes").insert(asdict(box))
        return box

    def ensure_local(self) -> Box:
        """The machine the console runs on, registered once: the embedded default box."""
        try:
            return self.get(LOCAL_BOX)
        except NoSuchBox:
            return self.add(Box(name=LOCAL_BOX, kind="local", status="new"))

    def get(self, name: str) -> Box:
        rows = self.store.rows("SELECT * FROM boxes WHERE name = ?", [name])
        if not rows:
            raise NoSuchBox(name)
        return Box.from_row(rows[0])

    def every(self, include_destroyed: bool = True) -> list[Box]:
        where = "" if include_destroyed else "WHERE destroyed_ms IS NULL"
        return [Box.from_row(r) for r in self.store.rows(f"SELECT * FROM boxes {where} ORDER BY name")]

    def update(self, name: str, **values: Any) -> None:
        unknown = set(values) - {f.name for f in fields(Box)}
        if unknown:
            raise ValueError(f"unknown box fields: {sorted(unknown)}")
        values["updated_ms"] = self.store.clock()
        with self.store.atomic() as db:
            if not db.table("boxes").count_where("name = ?", [name]):
                raise NoSuchBox(name)
            db.table("boxes").update(name, values)

    def remove(self, name: str) -> None:
        with self.store.atomic() as db:
            if not db.table("boxes").count_where("name = ?", [name]):
                raise NoSuchBox(name)
            db.execute("DELETE FROM boxes WHERE name = ?", [name])
