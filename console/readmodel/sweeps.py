"""Sweeps as of an instant: each arm a sweep tried, its outcome, the engine's reason and its benches; for a
sweep over several boxes, where each attempt ran and what each box and GPU is doing; and what every sweep
measured of MoE backends, which launches are linted against (rule 3 of the campaign write-up)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from console.readmodel.records import (
    SweepArmRow,
    SweepArmStatus,
    SweepAttemptRow,
    SweepBench,
    SweepBenchRecord,
    SweepBoxRow,
    SweepEntry,
    SweepStatus,
)
from console.recipes import Catalog, MoeEvidence
from console.recipes.vllm_flags import flag_value
from console.store import Store
from console.store.jsonutil import json_list, json_tuple_or_none
from console.store.launches import argv_flag
from console.store.sweeps import SweepRow

MOE_FLAG = "--kernel-config.moe_backend"


def moe_evidence(store: Store, catalog: Catalog) -> MoeEvidence:
    """Per profile, the MoE backends its sweep arms served with (the pin in the argv that ran), the ones an
    engine's refusal named as accepted, and the pins refused. Arms the catalog no longer knows are left out."""
    served: dict[str, set[str]] = defaultdict(set)
    accepted: dict[str, set[str]] = defaultdict(set)
    refused: dict[str, set[str]] = defaultdict(set)
    rows = store.rows(
        """SELECT DISTINCT a.state, a.reason, a.backends_accepted, l.arm, r.argv
           FROM sweep_arms a JOIN json_each(a.launch_ids) j JOIN launches l ON l.id = j.value
           JOIN arms r ON r.id = l.arm_id
           WHERE a.state IN ('served', 'degenerate', 'refused')"""
    )
    for row in rows:
        profile = catalog.profile_of(row["arm"])
        if profile is None:
            continue
        pinned = argv_flag(json.loads(row["argv"]), MOE_FLAG)
        if row["state"] != "refused":
            served[profile.name].update([pinned] if pinned else [])
            continue
        if "moe" not in (row["reason"] or "").lower():
            continue  # a refusal of something else (the linear kernel, a flag) says nothing of experts
        refused[profile.name].update([pinned] if pinned else [])
        names = json_list(row["backends_accepted"])
        accepted[profile.name].update(v for v in (flag_value(str(n), "moe_backend") for n in names) if v)
    return MoeEvidence(
        served={k: frozenset(v) for k, v in served.items()},
        accepted={k: frozenset(v) for k, v in accepted.items()},
        refused={k: frozenset(v) for k, v in refused.items()},
    )


def _memory(text: str | None) -> tuple[tuple[int, float | None], ...]:
    return tuple(sorted((int(g), m) for g, m in json.loads(text).items())) if text else ()


def _gpus(text: str | None) -> tuple[int, ...] | None:
    return tuple(int(g) for g in json_list(text)) if text else None


def _attempts(store: Store, sweep_id: int, at: int) -> dict[int, list[SweepAttemptRow]]:
    """Each arm's attempts begun by ``at``; an attempt that ended later reads as running."""
    out: dict[int, list[SweepAttemptRow]] = defaultdict(list)
    for t in store.rows(
        """SELECT t.* FROM sweep_attempts t JOIN sweep_arms a ON a.id = t.sweep_arm_id
           WHERE a.sweep_id = ? AND t.started_ms <= ? ORDER BY t.sweep_arm_id, t.attempt""",
        [sweep_id, at],
    ):
        done = t["ended_ms"] is not None and t["ended_ms"] <= at
        out[t["sweep_arm_id"]].append(
            SweepAttemptRow(
                attempt=t["attempt"],
                box=t["box"],
                gpus=_gpus(t["gpus"]),
                outcome=t["outcome"] if done else None,
                reason=t["reason"] if done else None,
                mem_before=_memory(t["mem_before"]),
                mem_after=_memory(t["mem_after"]),
                started_ms=t["started_ms"],
                ended_ms=t["ended_ms"] if done else None,
            )
        )
    return out


def _boxes(store: Store, s: dict[str, Any], at: int) -> tuple[SweepBoxRow, ...]:
    """The boxes a sweep feeds as of ``at`` (a sweep recorded before boxes were: its one box)."""
    rows = store.rows("SELECT * FROM sweep_boxes WHERE sweep_id = ? ORDER BY position, box", [s["id"]])
    if not rows:
        rows = [
            {
                "box": s["box"],
                "state": "walking",
                "detail": None,
                "excluded": None,
                "updated_ms": s["created_ms"],
            }
        ]
    out = []
    for b in rows:
        now = b["updated_ms"] <= at
        probe = None
        if s["layout"] == "packed":  # its GPUs are the queue's slots
            probe = store.scalar(
                "SELECT data FROM probes WHERE box = ? AND t_ms <= ? ORDER BY t_ms DESC, id DESC LIMIT 1",
                [b["box"], at],
            )
        excluded = json.loads(b["excluded"]) if now and b["excluded"] else {}
        out.append(
            SweepBoxRow(
                box=b["box"],
                state=b["state"] if now else "walking",
                detail=b["detail"] if now else None,
                excluded=tuple(sorted((int(g), str(why)) for g, why in excluded.items())),
                gpu_count=len(json.loads(probe).get("gpus") or []) if probe else None,
            )
        )
    return tuple(out)


def sweep_arm_state(row: dict[str, Any], at: int) -> str:
    """What a sweep arm was at ``at``: pending before its attempt began, running until it ended."""
    started, ended, state = row["started_ms"], row["ended_ms"], row["state"]
    if started is None or started > at:
        return "pending"
    if ended is None or ended > at:
        return "running" if state != "pending" else "pending"
    return str(state)


def sweeps(store: Store, at: int) -> list[SweepEntry]:
    """Every sweep begun by ``at``, newest first, with each arm's outcome and benches as of ``at``."""
    out = []
    for s in store.rows("SELECT * FROM sweeps WHERE created_ms <= ? ORDER BY id DESC", [at]):
        benches: dict[int, list[SweepBench]] = defaultdict(list)
        for b in store.rows(
            """SELECT b.sweep_arm_id, b.shape, b.concurrency, b.error, r.out_tok_per_s, r.queueing, r.kernel_fallback,
                      r.replicas
               FROM sweep_benches b JOIN sweep_arms a ON a.id = b.sweep_arm_id
               LEFT JOIN bench_runs r ON r.id = b.bench_run_id
               WHERE a.sweep_id = ? AND b.t_ms <= ? ORDER BY b.t_ms, b.shape, b.concurrency""",
            [s["id"], at],
        ):
            benches[b["sweep_arm_id"]].append(
                SweepBench(
                    b["shape"],
                    b["concurrency"],
                    b["out_tok_per_s"],
                    bool(b["queueing"]),
                    b["error"],
                    bool(b["kernel_fallback"]),
                    b["replicas"],
                )
            )
        attempts = _attempts(store, s["id"], at)
        arms = []
        for a in store.rows("SELECT * FROM sweep_arms WHERE sweep_id = ? ORDER BY position", [s["id"]]):
            state = sweep_arm_state(a, at)
            done = state not in ("pending", "running")
            history = tuple(attempts.get(a["id"], ()))
            last = history[-1] if history else None
            earlier = last is not None and last.attempt < a["attempts"]  # a later attempt began after ``at``
            if earlier and last is not None:
                state, done = last.outcome or "running", last.outcome is not None
            arms.append(
                SweepArmRow(
                    position=a["position"],
                    arm=a["arm"],
                    origin=a["origin"],
                    queued_by=a["queued_by"],
                    state=state,
                    attempts=len(history) if earlier else a["attempts"],
                    reason=(last.reason if earlier and last else a["reason"]) if done else None,
                    backends_accepted=json_tuple_or_none(a["backends_accepted"]) if done else (),
                    backends_potential=tuple(json_list(a["backends_potential"])) if done else (),
                    launch_ids=tuple(json_list(a["launch_ids"])),
                    kv_cache_tokens=a["kv_cache_tokens"],
                    max_concurrency=a["max_concurrency"],
                    started_ms=(last.started_ms if earlier and last else a["started_ms"])
                    if state != "pending"
                    else None,
                    ended_ms=(last.ended_ms if earlier and last else a["ended_ms"]) if done else None,
                    benches=tuple(benches.get(a["id"], ())),
                    box=last.box if last else None,
                    gpus=last.gpus if last else None,
                    history=history,
                )
            )
        state = s["state"] if s["updated_ms"] <= at else "running"
        out.append(
            SweepEntry(
                id=s["id"],
                list_name=s["list"],
                box=s["box"],
                state=state,
                detail=s["detail"] if s["updated_ms"] <= at else None,
                shapes=tuple(json_list(s["shapes"])),
                concurrency=tuple(json_list(s["concurrency"])),
                created_ms=s["created_ms"],
                updated_ms=s["updated_ms"],
                arms=tuple(arms),
                layout=s["layout"],
                boxes=_boxes(store, s, at),
            )
        )
    return out


def sweep_status(store: Store, sweep_id: int) -> SweepStatus:
    """One sweep now, with the boxes it feeds and every arm's benches and attempts (an unknown id is the
    store's one-line error)."""
    return _status(store, store.sweeps.get(sweep_id))


def sweep_statuses(store: Store, box: str | None = None) -> list[SweepStatus]:
    """Every sweep now, oldest first; with ``box``, those that feed it."""
    return [_status(store, s) for s in store.sweeps.every(box)]


def _status(store: Store, sweep: SweepRow) -> SweepStatus:
    arms = tuple(
        SweepArmStatus(
            arm,
            tuple(_bench(b) for b in store.sweeps.benches(arm.id)),
            tuple(store.sweeps.attempts_of(arm.id)),
        )
        for arm in store.sweeps.arms(sweep.id)
    )
    return SweepStatus(sweep, tuple(store.sweeps.boxes(sweep.id)), arms)


def _bench(row: dict[str, Any]) -> SweepBenchRecord:
    return SweepBenchRecord(
        sweep_arm_id=row["sweep_arm_id"],
        launch_id=row["launch_id"],
        shape=row["shape"],
        concurrency=row["concurrency"],
        bench_run_id=row["bench_run_id"],
        error=row["error"],
        admitted=row["admitted"],
        t_ms=row["t_ms"],
        out_tok_per_s=row["out_tok_per_s"],
        queueing=row["queueing"],
        diagnostic_only=row["diagnostic_only"],
    )
