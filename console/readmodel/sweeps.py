"""Sweeps as of an instant: each arm a sweep tried, its outcome, the engine's reason and its benches; and
what every sweep measured of MoE backends, which launches are linted against (seed rule 3)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from console.readmodel.records import SweepArmRow, SweepBench, SweepEntry
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
                    backends_accepted=json_tuple_or_none(a["backends_accepted"]) if done else (),
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
