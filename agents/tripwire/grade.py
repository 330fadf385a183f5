"""Per-item verdicts and the run's verdict.

An item is ``degenerate`` when any repetition detector fires on anything the model generated (answer
or reasoning), else ``ok`` when the graded answer holds an expected answer, else ``wrong``. The run
passes when at most ``max_degenerate`` items are degenerate, at least ``min_ok`` are ok, and no
reasoning leaked into the answers (a missing reasoning parser means the arm is not served the vendor's
way: its numbers would be the harness's, campaign rule 9). Defaults follow the write-up's readings: 19/1/0 and
18/1/1 were clean, 11/8/1 and 9/11/0 were not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.tripwire.client import ChatResult
from agents.tripwire.detect import matches, read_answer, repetition
from agents.tripwire.items import Item

MIN_OK = 18
MAX_DEGENERATE = 1
ANSWER_CHARS = 400


@dataclass(frozen=True)
class Thresholds:
    min_ok: int = MIN_OK
    max_degenerate: int = MAX_DEGENERATE


def grade_item(item: Item, result: ChatResult) -> dict[str, Any]:
    if result.error is not None:
        return {
            "id": item.id,
            "verdict": "wrong",
            "reasons": [f"request failed: {result.error}"],
            "answer": "",
            "reasoning_leak": None,
            "finish_reason": None,
            "completion_tokens": None,
            "seconds": round(result.seconds, 3),
        }
    reading = read_answer(result.content, result.reasoning_content)
    reasons = repetition(result.content)
    if result.reasoning_content:
        reasons += [f"in reasoning: {r}" for r in repetition(result.reasoning_content)]
    if reasons:
        verdict = "degenerate"
    elif matches(reading.answer, item.expect, item.case):
        verdict = "ok"
    else:
        verdict = "wrong"
        if reading.unfinished_thinking or result.finish_reason == "length":
            reasons.append(f"cut off at max_tokens (finish_reason {result.finish_reason}) before an answer")
        else:
            reasons.append(f"expected {' or '.join(item.expect)}")
    return {
        "id": item.id,
        "verdict": verdict,
        "reasons": reasons,
        "answer": reading.answer[-ANSWER_CHARS:],
        "reasoning_leak": reading.reasoning_leak,
        "finish_reason": result.finish_reason,
        "completion_tokens": result.completion_tokens,
        "seconds": round(result.seconds, 3),
    }


def summarize(items: list[dict[str, Any]], thresholds: Thresholds) -> dict[str, Any]:
    counts = {v: sum(1 for i in items if i["verdict"] == v) for v in ("ok", "degenerate", "wrong")}
    leaks = sum(1 for i in items if i["reasoning_leak"])
    if counts["degenerate"] > thresholds.max_degenerate:
        verdict = "degenerate"
    elif leaks:
        verdict = "reasoning-leak"
    elif counts["ok"] < thresholds.min_ok:
        verdict = "wrong"
    else:
        verdict = "clean"
    return {
        **counts,
        "total": len(items),
        "score": f"{counts['ok']}/{len(items)}",
        "reasoning_leak": leaks,
        "passed": verdict == "clean",
        "verdict": verdict,
        "thresholds": {"min_ok": thresholds.min_ok, "max_degenerate": thresholds.max_degenerate},
    }
