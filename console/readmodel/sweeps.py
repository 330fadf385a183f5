"""Sweeps as of an instant: each arm a sweep tried, its outcome, the engine's reason and its benches; for a
sweep over several boxes, where each attempt ran and what each box and GPU is doing; and what every sweep
measured of MoE backends, which launches are linted against (rule 3 of the campaign write-up)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from console.readmodel.records import SweepArmRow, SweepAttemptRow, SweepBench, SweepBoxRow, SweepEntry
from console.recipes import Catalog, MoeEvidence
from console.recipes.vllm_flags import flag_value
from console.store import Store
from console.store.jsonutil import json_list, json_tuple_or_none
from console.store.launches import argv_flag

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


NOW = 2**63 - 1
"""An instant after everything stored: a sweep read as of it is the sweep as the store holds it now."""


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
                launch_ids=tuple(json_list(t["launch_ids"])),
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
                "position": 0,
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
                position=b["position"],
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


def _benches(store: Store, sweep_id: int, at: int) -> dict[int, list[SweepBench]]:
    """Each arm's node benches stored by ``at``, with their throughput rows' figures."""
    out: dict[int, list[SweepBench]] = defaultdict(list)
    for b in store.rows(
        """SELECT b.*, r.out_tok_per_s, r.queueing, r.kernel_fallback, r.diagnostic_only, r.replicas
           FROM sweep_benches b JOIN sweep_arms a ON a.id = b.sweep_arm_id
           LEFT JOIN bench_runs r ON r.id = b.bench_run_id
           WHERE a.sweep_id = ? AND b.t_ms <= ? ORDER BY b.t_ms, b.shape, b.concurrency""",
        [sweep_id, at],
    ):
        out[b["sweep_arm_id"]].append(
            SweepBench(
                launch_id=b["launch_id"],
                shape=b["shape"],
                concurrency=b["concurrency"],
                bench_run_id=b["bench_run_id"],
                error=b["error"],
                admitted=b["admitted"],
                t_ms=b["t_ms"],
                out_tok_per_s=b["out_tok_per_s"],
                queueing=bool(b["queueing"]),
                kernel_fallback=bool(b["kernel_fallback"]),
                diagnostic_only=bool(b["diagnostic_only"]),
                replicas=b["replicas"],
            )
        )
    return out


def _arm(
    a: dict[str, Any], at: int, history: tuple[SweepAttemptRow, ...], benches: list[SweepBench]
) -> SweepArmRow:
    """One arm as of ``at``: an attempt that began later does not count, so an arm retried after ``at``
    reads as its earlier attempt left it."""
    state = sweep_arm_state(a, at)
    done = state not in ("pending", "running")
    last = history[-1] if history else None
    earlier = last is not None and last.attempt < a["attempts"]  # a later attempt began after ``at``
    if earlier and last is not None:
        state, done = last.outcome or "running", last.outcome is not None
    of_last = earlier and last is not None
    return SweepArmRow(
        id=a["id"],
        position=a["position"],
        arm=a["arm"],
        base=a["base"],
        linear_backend=a["linear_backend"],
        moe_backend=a["moe_backend"],
        origin=a["origin"],
        queued_by=a["queued_by"],
        state=state,
        attempts=len(history) if earlier else a["attempts"],
        reason=(last.reason if of_last and last else a["reason"]) if done else None,
        backends_accepted=json_tuple_or_none(a["backends_accepted"]) if done else (),
        backends_potential=tuple(json_list(a["backends_potential"])) if done else (),
        launch_ids=tuple(json_list(a["launch_ids"])),
        gpu_mem_mib=a["gpu_mem_mib"],
        kv_cache_tokens=a["kv_cache_tokens"],
        max_concurrency=a["max_concurrency"],
        tripwire_run_id=a["tripwire_run_id"] if done else None,
        started_ms=(last.started_ms if of_last and last else a["started_ms"]) if state != "pending" else None,
        ended_ms=(last.ended_ms if of_last and last else a["ended_ms"]) if done else None,
        benches=tuple(benches),
        box=last.box if last else None,
        gpus=last.gpus if last else None,
        history=history,
    )


def _entry(store: Store, s: dict[str, Any], at: int) -> SweepEntry:
    benches = _benches(store, s["id"], at)
    attempts = _attempts(store, s["id"], at)
    arms = tuple(
        _arm(a, at, tuple(attempts.get(a["id"], ())), benches.get(a["id"], []))
        for a in store.rows("SELECT * FROM sweep_arms WHERE sweep_id = ? ORDER BY position", [s["id"]])
    )
    now = s["updated_ms"] <= at
    return SweepEntry(
        id=s["id"],
        list_name=s["list"],
        box=s["box"],
        state=s["state"] if now else "running",
        detail=s["detail"] if now else None,
        shapes=tuple(json_list(s["shapes"])),
        concurrency=tuple(json_list(s["concurrency"])),
        bench_degenerate=bool(s["bench_degenerate"]),
        runner_pid=s["runner_pid"],
        runner_host=s["runner_host"],
        created_ms=s["created_ms"],
        updated_ms=s["updated_ms"],
        arms=arms,
        layout=s["layout"],
        boxes=_boxes(store, s, at),
    )


def sweeps(store: Store, at: int) -> list[SweepEntry]:
    """Every sweep begun by ``at``, newest first, with each arm's outcome and benches as of ``at``."""
    return [
        _entry(store, s, at)
        for s in store.rows("SELECT * FROM sweeps WHERE created_ms <= ? ORDER BY id DESC", [at])
    ]


def sweep_status(store: Store, sweep_id: int) -> SweepEntry:
    """One sweep now, with the boxes it feeds and every arm's benches and attempts (an unknown id is the
    store's one-line error)."""
    rows = store.rows("SELECT * FROM sweeps WHERE id = ?", [sweep_id])
    if not rows:
        store.sweeps.get(sweep_id)  # raises the store's one-line error for an unknown id
    return _entry(store, rows[0], NOW)


def sweep_statuses(store: Store, box: str | None = None) -> list[SweepEntry]:
    """Every sweep now, oldest first; with ``box``, those that feed it."""
    return [sweep_status(store, s.id) for s in store.sweeps.every(box)]
