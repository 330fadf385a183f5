"""Inspect AI eval logs (``.eval`` and ``.json``), read with the standard library.

The format is the ``EvalLog`` of UKGovernmentBEIS/inspect_ai (src/inspect_ai/log/_log.py, written by
src/inspect_ai/log/_recorders/eval.py and json.py; log schema version 2). A ``.json`` log is the whole
``EvalLog``: ``version``, ``status``, ``eval`` (task, model, created, packages, model_generate_config),
``plan``, ``results``, ``stats`` and ``samples``. A ``.eval`` log is a zip holding ``header.json`` (the same
without samples; ``_journal/start.json`` while the run is in progress) and one ``samples/<id>_epoch_<n>.json``
per sample. Since 0.3.206 Inspect compresses those entries with Zstandard, which Python's ``zipfile``
reads from 3.14 on; earlier Pythons are told to convert the log to ``.json`` first.

Per sample: ``scores`` maps each scorer to a ``Score`` whose ``value`` becomes 0..1 as Inspect's own
``value_to_float`` does (C 1, P 0.5, I and N 0, yes/true 1, no/false 0, numbers as they are). An item is
truncated when the model stopped at its token cap (``output.choices[].stop_reason`` ``max_tokens`` or
``model_length``) or the sample hit a token or context limit (``limit.type``); its output tokens are the
evaluated model's ``model_usage`` for the sample, else the final output's ``usage``.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import zipfile
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from console.quality.harness import (
    HarnessFileError,
    HarnessRun,
    digest,
    load_json,
    read_file,
    unit_score,
)
from console.store.quality import QualityItem
from console.store.served import thinking_setting
from console.timeutil import to_ms

HARNESS = "inspect"
STOPPED_AT_CAP = frozenset({"max_tokens", "model_length"})
LIMITS_AT_CAP = frozenset({"token", "context"})
VALUES = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0, "yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}
NOT_RECORDED = frozenset({"extra_headers"})
"""Generation settings never stored: headers can carry credentials."""
_SAMPLE_ENTRY = re.compile(r"^samples/[^/]+\.json$")


def read_inspect(path: Path, metric: str | None = None, data: bytes | None = None) -> HarnessRun:
    """The run in the Inspect log ``path`` (``data``: its bytes, where ``read_file`` already read them)."""
    if data is None:
        data = read_file(path)  # parsed and digested from this one read
    if path.suffix == ".eval":
        header, samples = _read_zip(path, data)
    else:
        header = load_json(path, data)
        if not isinstance(header, dict) or not isinstance(header.get("eval"), dict):
            raise HarnessFileError(
                f"{path}: neither an Inspect eval log (no 'eval') nor an lm-eval results file (no 'results')",
                "give an lm-eval results_*.json or samples_*.jsonl, or an Inspect .eval/.json log",
            )
        samples = header.get("samples") or []
    spec: Mapping[str, Any] = header["eval"]
    model = spec.get("model")
    scorer = _scorer(header, samples, metric, path)
    items: list[QualityItem] = []
    unscored = 0
    for sample in samples:
        score = (sample.get("scores") or {}).get(scorer)
        if score is None:
            unscored += 1
            continue
        sample_id, epoch = sample.get("id"), sample.get("epoch", 1)
        item_id = str(sample_id) if epoch == 1 else f"{sample_id}#epoch{epoch}"
        value = _value(score.get("value"), f"{path.name}: sample {item_id} ({scorer})")
        items.append(
            QualityItem(
                str(spec.get("task")), item_id, value, _truncated(sample), _output_tokens(sample, model)
            )
        )
    if not items:
        raise HarnessFileError(f"{path}: no sample has a {scorer} score (status {header.get('status')})")
    config = {k: v for k, v in (spec.get("model_generate_config") or {}).items() if k not in NOT_RECORDED}
    created = spec.get("created")
    return HarnessRun(
        harness=HARNESS,
        harness_version=(spec.get("packages") or {}).get("inspect_ai"),
        tasks=(str(spec.get("task")),),
        metric=scorer,
        model=model,
        t_ms=_created_ms(created, path) if isinstance(created, str) else None,
        sampling=config,
        thinking=thinking_setting(config),
        items=tuple(items),
        unscored=unscored,
        files=(str(path),),
        digest=digest([(path.name, data)]),
    )


def _created_ms(created: str, path: Path) -> int:
    try:
        return to_ms(datetime.fromisoformat(created))
    except ValueError as exc:  # not ISO 8601, or no UTC offset (console.timeutil refuses naive times)
        raise HarnessFileError(
            f"{path.name}: eval.created {created!r} is not an instant with a UTC offset"
        ) from exc


def _read_zip(path: Path, data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = z.namelist()
            head = "header.json" if "header.json" in names else "_journal/start.json"
            if head not in names:
                raise HarnessFileError(f"{path}: a zip, but not an Inspect log (no header.json)")
            header = json.loads(z.read(head))
            samples = [json.loads(z.read(name)) for name in sorted(names) if _SAMPLE_ENTRY.match(name)]
    except zipfile.BadZipFile as exc:
        raise HarnessFileError(f"{path}: not a readable .eval zip ({exc})") from exc
    except NotImplementedError as exc:  # zipfile's word for a compression method it lacks
        raise HarnessFileError(
            f"{path}: its entries are compressed with a method this Python {sys.version_info.major}."
            f"{sys.version_info.minor} cannot read ({exc}; Inspect 0.3.206 and later use Zstandard, "
            "which Python reads from 3.14)",
            "convert it with `inspect log convert FILE --to json --output-dir DIR` and import the .json",
        ) from exc
    except json.JSONDecodeError as exc:
        raise HarnessFileError(f"{path}: an entry is not JSON ({exc.msg})") from exc
    return header, samples


def _scorer(header: Mapping[str, Any], samples: list[dict[str, Any]], wanted: str | None, path: Path) -> str:
    """The scorer whose value is the item's score: ``wanted``, else the log's first."""
    logged: dict[str, None] = {}
    for sample in samples:
        logged.update(dict.fromkeys(sample.get("scores") or {}))
    if wanted:
        if wanted not in logged:
            raise HarnessFileError(f"{path.name}: no scorer {wanted!r}; it has {', '.join(logged) or 'none'}")
        return wanted
    for score in (header.get("results") or {}).get("scores") or []:
        if score.get("name") in logged:
            return str(score["name"])
    if not logged:
        raise HarnessFileError(f"{path.name}: no sample was scored (status {header.get('status')})")
    return next(iter(logged))


def _value(value: Any, where: str) -> float:
    """Inspect's value_to_float (src/inspect_ai/scorer/_metric.py), then checked to be 0..1."""
    if isinstance(value, str):
        key = value if value in VALUES else value.lower()
        if key in VALUES:
            return VALUES[key]
        with contextlib.suppress(ValueError):  # refused below, with where it was found
            value = float(value)
    return unit_score(value, where)


def _truncated(sample: Mapping[str, Any]) -> bool | None:
    choices = (sample.get("output") or {}).get("choices") or []
    limit = (sample.get("limit") or {}).get("type")
    if limit in LIMITS_AT_CAP or any(c.get("stop_reason") in STOPPED_AT_CAP for c in choices):
        return True
    return False if choices else None


def _output_tokens(sample: Mapping[str, Any], model: str | None) -> int | None:
    usage = (sample.get("model_usage") or {}).get(model) or (sample.get("output") or {}).get("usage")
    tokens = (usage or {}).get("output_tokens")
    return int(tokens) if isinstance(tokens, int | float) else None
