"""Power: is every GPU allowed its full power, and do the GPUs of one box agree?

Campaign rule 7: the same RTX PRO 6000 cards capped at 400 W instead of 600 W lost 23% of throughput on
NVFP4 and 34% on FP8, and a capped host looks healthy from every other angle. ``enforced.power.limit``
is the ceiling the driver really applies (the minimum of all limiters), so it is the one judged; the
requested ``power.limit`` is reported beside it when the two differ.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from agents.protocol import ProbeGpu, ProbeReport
from console.checks.probe_view import gpu_label, gpus, no_gpu_tooling, num, watts
from console.checks.verdict import FAIL, OK, WARN, Verdict

CHECK = "power"
TOLERANCE_W = 1.0
"""nvidia-smi prints limits to 0.01 W and NVML in mW; a watt of slack absorbs rounding, never a cap."""

SEED_CAP_COST = (
    "the write-up measured 400 of 600 W costing 23% of throughput on NVFP4 and 34% on FP8: "
    "numbers from this box rank configurations but do not transfer to an uncapped one"
)


def _row(g: ProbeGpu) -> dict[str, Any]:
    return {
        "gpu": g.get("index"),
        "name": g.get("name"),
        "limit_w": num(g.get("power_limit_w")),
        "enforced_w": num(g.get("enforced_limit_w")),
        "default_w": num(g.get("default_limit_w")),
        "max_w": num(g.get("max_limit_w")),
    }


def check_power(probe: ProbeReport) -> list[Verdict]:
    if no_gpu_tooling(probe):
        return [Verdict(CHECK, OK, "no NVIDIA GPU on this box: no power limits to check", {"gpus": []})]
    rows = [_row(g) for g in gpus(probe)]
    if not rows:
        return [
            Verdict(
                CHECK,
                FAIL,
                f"GPU tooling answered ({probe.get('source')}) but listed no GPU; "
                "run nvidia-smi on the box to see why",
                {"gpus": []},
            )
        ]
    verdicts: list[Verdict] = []
    unreadable = [r["gpu"] for r in rows if (r["enforced_w"] or r["limit_w"]) is None or r["max_w"] is None]
    if unreadable:
        verdicts.append(
            Verdict(
                CHECK,
                WARN,
                f"{gpu_label(unreadable)}: power limit or maximum not readable ([N/A]); cannot tell whether "
                "the host caps them; check `nvidia-smi -q -d POWER` on the box",
                {"gpus": [r for r in rows if r["gpu"] in unreadable]},
            )
        )
    readable = [r for r in rows if r["gpu"] not in unreadable]
    capped: dict[tuple[float, float, float | None, float | None], list[int]] = defaultdict(list)
    for r in readable:
        ceiling = r["enforced_w"] if r["enforced_w"] is not None else r["limit_w"]
        r["ceiling_w"] = ceiling
        if ceiling < r["max_w"] - TOLERANCE_W:
            capped[(ceiling, r["max_w"], r["limit_w"], r["default_w"])].append(r["gpu"])
    for (ceiling, max_w, limit_w, default_w), idx in sorted(capped.items(), key=lambda kv: kv[1]):
        loss = (max_w - ceiling) / max_w
        parts = [f"{gpu_label(idx)} capped at {watts(ceiling)} of a {watts(max_w)} maximum (-{loss:.0%})"]
        if limit_w is not None and limit_w - ceiling > TOLERANCE_W:
            parts.append(
                f"requested {watts(limit_w)} but another limiter (host, PSU or thermal) enforces less"
            )
        elif default_w is not None and abs(default_w - ceiling) <= TOLERANCE_W:
            parts.append("the card's default limit; `nvidia-smi -pl` can raise it if the host allows")
        else:
            parts.append(f"set below the {watts(default_w) if default_w else 'unknown'} default by software")
        parts.append(SEED_CAP_COST)
        verdicts.append(
            Verdict(
                CHECK,
                WARN,
                "; ".join(parts),
                {
                    "gpus": [r for r in readable if r["gpu"] in idx],
                    "loss_fraction": round(loss, 4),
                    "seed_cost": {"nvfp4": -0.23, "fp8": -0.34, "at_w": 400, "of_w": 600},
                },
            )
        )
    verdicts.extend(_mismatch(rows))
    if not verdicts:
        r0 = readable[0]
        verdicts.append(
            Verdict(
                CHECK,
                OK,
                f"{gpu_label([r['gpu'] for r in readable])} at full power: {watts(r0['ceiling_w'])} enforced "
                f"of {watts(r0['max_w'])} maximum",
                {"gpus": readable},
            )
        )
    return verdicts


def _mismatch(rows: list[dict[str, Any]]) -> list[Verdict]:
    """One box, different cards or different ceilings: replicas on it will not run at one speed."""
    names = {r["name"] for r in rows}
    ceilings = {r.get("ceiling_w") for r in rows if r.get("ceiling_w") is not None}
    if len(names) <= 1 and len(ceilings) <= 1:
        return []
    groups: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        ceiling = r.get("ceiling_w")
        groups[f"{r['name']} @ {watts(ceiling) if ceiling is not None else '?'}"].append(r["gpu"])
    listing = ", ".join(
        f"{gpu_label(idx)} {key}" for key, idx in sorted(groups.items(), key=lambda kv: kv[1])
    )
    return [
        Verdict(
            CHECK,
            WARN,
            f"GPUs on this box differ ({listing}): replicas will not run at one speed and per-box figures "
            "mix cards; pin arms to matching GPUs",
            {"groups": {k: v for k, v in groups.items()}},
        )
    ]
