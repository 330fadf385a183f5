"""Is a journal event well-formed? The one check ingest makes before an event may touch state.db.

Why a check of its own: one malformed event (a body that is not JSON, ``gpus`` as a string, a text where
a number belongs) used to fail the whole batch, and since the box re-sends the same batch after every
reconnect, the link stalled forever behind it. Now such an event is quarantined and ingest moves on.

The rules are the wire contract of agents/protocol.py, read conservatively: an unknown kind or an
unknown field is not malformed (a newer agent may send it); only a known field of the wrong type is,
and only where the store would write it into a typed column or a derived row. Missing fields are not
checked here: ingest keeps such an event as a journal row and says why (see console/store/ingest.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

_INT64 = 2**63


def _integer(v: Any) -> bool:
    return type(v) is int and -_INT64 <= v < _INT64


def _number(v: Any) -> bool:
    if type(v) is int:
        return -_INT64 <= v < _INT64
    return type(v) is float and math.isfinite(v)


def _text(v: Any) -> bool:
    return type(v) is str


def _flag(v: Any) -> bool:
    return type(v) is bool


def _array(v: Any) -> bool:
    return type(v) is list


def _object(v: Any) -> bool:
    return type(v) is dict


_TYPES: dict[Callable[[Any], bool], str] = {
    _integer: "an integer", _number: "a finite number", _text: "text", _flag: "true or false",
    _array: "a list", _object: "an object",
}  # fmt: skip

GPU_COLUMNS = (
    "power_w", "power_limit_w", "enforced_limit_w", "max_limit_w", "sm_clock_mhz",
    "util_pct", "mem_used_mib", "mem_total_mib", "temp_c",
)  # fmt: skip
SERVER_COLUMNS = (
    "gen_tok_per_s", "prompt_tok_per_s", "running", "waiting", "kv_usage",
    "prefix_hit_rate", "gen_tokens_total", "prompt_tokens_total",
)  # fmt: skip

_NULLABLE = 1
# kind -> field -> (check, nullable). Fields the store writes into columns or derives rows from.
_FIELDS: dict[str, dict[str, tuple[Callable[[Any], bool], int]]] = {
    "gpu_sample": {"gpus": (_array, 0)},
    "server_sample": {"launch_id": (_text, 0), **{c: (_number, _NULLABLE) for c in SERVER_COLUMNS}},
    "launch_state": {
        "launch_id": (_text, 0), "state": (_text, 0), "pid": (_integer, _NULLABLE), "port": (_integer, _NULLABLE),
        "exit_code": (_integer, _NULLABLE), "reason": (_text, _NULLABLE), "log_path": (_text, _NULLABLE),
        "gpus": (_array, _NULLABLE), "backends_accepted": (_array, _NULLABLE), "arm": (_text, _NULLABLE),
    },
    "kernel_line": {"launch_id": (_text, 0), "category": (_text, 0), "line": (_text, 0)},
    "launch_budget": {"launch_id": (_text, 0), "kv_cache_tokens": (_number, _NULLABLE),
                      "max_concurrency": (_number, _NULLABLE)},
    "gpu_released": {"launch_id": (_text, 0), "released": (_flag, 0)},
    "probe": {"probe": (_object, 0)},
    "bench_result": {"bench_id": (_text, 0), "launch_id": (_text, 0), "result": (_object, 0)},
    "tripwire_result": {"tripwire_id": (_text, 0), "launch_id": (_text, 0), "result": (_object, 0)},
    "deadline": {"timer_id": (_text, 0), "state": (_text, 0)},
    "command_done": {"command_id": (_text, 0), "ok": (_flag, 0), "error": (_text, _NULLABLE)},
    "agent_started": {"version": (_text, _NULLABLE)},
}  # fmt: skip


def _field_problem(where: str, value: Any, check: Callable[[Any], bool], nullable: int) -> str | None:
    if (value is None and nullable) or check(value):
        return None
    return f"{where} is {_shown(value)}, not {_TYPES[check]}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def problem(event: Any) -> str | None:
    """Why ``event`` is malformed, in one line; None when it may be ingested."""
    if type(event) is not dict:
        return f"the event is {_shown(event)}, not a JSON object"
    if "malformed" in event:  # the agent could not read the row itself (agents/journal.py wire_event)
        return f"the box journal row is unreadable: {event['malformed']}"
    envelope: tuple[tuple[str, Callable[[Any], bool]], ...] = (("t_ms", _integer), ("kind", _text))
    for key, check in envelope:
        found = _field_problem(key, event.get(key), check, 0)
        if found:
            return found
    for key, (check, nullable) in _FIELDS.get(event["kind"], {}).items():
        if key in event:
            found = _field_problem(key, event[key], check, nullable)
            if found:
                return found
    if event["kind"] == "gpu_sample" and type(event.get("gpus")) is list:
        return _gpus_problem(event["gpus"])
    return None


def _gpus_problem(gpus: list[Any]) -> str | None:
    for i, gpu in enumerate(gpus):
        if _plain_gpu(gpu):
            continue
        if type(gpu) is not dict:
            return f"gpus[{i}] is {_shown(gpu)}, not an object"
        found = _field_problem(f"gpus[{i}].gpu", gpu.get("gpu"), _integer, 0)
        for column in GPU_COLUMNS:
            found = found or _field_problem(f"gpus[{i}].{column}", gpu.get(column), _number, _NULLABLE)
        return found
    return None


def _plain_gpu(gpu: Any) -> bool:
    """The common case, fast (a backlog holds hundreds of thousands): an object of numbers and nulls.

    Floats are not checked for NaN here: ingest encodes every event with ``allow_nan=False`` and
    quarantines what fails, so a NaN anywhere is caught once, there.
    """
    if type(gpu) is not dict or not _integer(gpu.get("gpu")):
        return False
    for column in GPU_COLUMNS:
        v = gpu.get(column)
        if v is None or type(v) is float or (type(v) is int and -_INT64 <= v < _INT64):
            continue
        return False
    return True
