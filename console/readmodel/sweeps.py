"""Sweeps as of an instant: each arm a sweep tried, its outcome, the engine's reason and its benches."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from console.readmodel.records import SweepArmRow, SweepBench, SweepEntry
from console.store import Store
from console.store.jsonutil import json_list


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
                SweepBench(b["shape"], b["concurrency"], b["out_tok_per_s"], bool(b["queueing"]), b["error"],
                           bool(b["kernel_fallback"]), b["replicas"])  # fmt: skip
            )
        arms = []
        for a in store.rows("SELECT * FROM sweep_arms WHERE sweep_id = ? ORDER BY position", [s["id"]]):
            state = sweep_arm_state(a, at)
            done = state not in ("pending", "running")
            arms.append(
                SweepArmRow(
                    position=a["position"],
                    arm=a["arm"],
                    origin=a["origin"],
                    queued_by=a["queued_by"],
                    state=state,
                    attempts=a["attempts"],
                    reason=a["reason"] if done else None,
                    backends_accepted=tuple(json_list(a["backends_accepted"])) if done else (),
                    backends_potential=tuple(json_list(a["backends_potential"])) if done else (),
                    launch_ids=tuple(json_list(a["launch_ids"])),
                    kv_cache_tokens=a["kv_cache_tokens"],
                    max_concurrency=a["max_concurrency"],
                    started_ms=a["started_ms"] if state != "pending" else None,
                    ended_ms=a["ended_ms"] if done else None,
                    benches=tuple(benches.get(a["id"], ())),
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
            )
        )
    return out
