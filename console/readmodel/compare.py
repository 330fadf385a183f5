"""Repeats, spread and ties: whether one configuration is really faster than another.

One run of a benchmark says nothing about its noise: two launches of the same arm, benched alike, land
a few per cent apart on a quiet box. So a comparison needs repeats on both sides (``campaign bench
--repeat N`` stores them as one group) and answers only when the two spreads do not overlap and the
difference is larger than the noise floor that a control pair (the same arm launched twice, benched
alike at the same shape and concurrency on the box) measured; otherwise it is a tie. A comparison only
reads rows, so it lives here, in the read model; ``campaign compare`` and the Results view print it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Literal

from console.errors import InputError
from console.readmodel.records import Comparison, ControlPair, GroupStanding, RepeatGroup, ResultRow
from console.readmodel.results import bench_rows
from console.recipes.model import Arm, Catalog
from console.store import Store

REPEATS_HINT = "bench it again with `campaign bench ... --repeat 3`: one run has no spread"


def repeat_groups(rows: Iterable[ResultRow]) -> list[RepeatGroup]:
    """The repeat groups among ``rows``, in the order their first run appears."""
    members: dict[str, list[ResultRow]] = {}
    for r in rows:
        if r.repeat_group:
            members.setdefault(r.repeat_group, []).append(r)
    return [_group(gid, sorted(rs, key=lambda r: (r.started_ms or 0, r.id))) for gid, rs in members.items()]


def _group(gid: str | None, rows: Sequence[ResultRow]) -> RepeatGroup:
    first = rows[0]
    return RepeatGroup(gid, first.arm, first.box, first.shape, first.concurrency, tuple(rows))


def control_pairs(groups: Iterable[RepeatGroup]) -> list[ControlPair]:
    """Every two repeated groups of one arm on one box at one shape and concurrency, from different launches."""
    alike: dict[tuple[str, str | None, str, int], list[RepeatGroup]] = {}
    for g in groups:
        if g.repeated and g.median:
            alike.setdefault((g.arm, g.box, g.shape, g.concurrency), []).append(g)
    return [
        ControlPair(a, b)
        for same in alike.values()
        for a, b in itertools.combinations(same, 2)
        if not a.launch_ids & b.launch_ids
    ]


def noise_floor(pairs: Iterable[ControlPair], a: RepeatGroup, b: RepeatGroup) -> ControlPair | None:
    """The widest control pair at the shape and concurrency of ``a`` and ``b``, on a box of theirs, other
    than the pair being compared (a control pair compared with itself would always be a tie)."""
    compared = {a.id, b.id}
    fitting = [
        p
        for p in pairs
        if p.a.shape == a.shape
        and p.a.concurrency == a.concurrency
        and p.a.box in (a.box, b.box)
        and {p.a.id, p.b.id} != compared
    ]
    return max(fitting, key=lambda p: p.floor, default=None)


def compare_groups(a: RepeatGroup, b: RepeatGroup, pairs: Iterable[ControlPair] = ()) -> Comparison:
    """The verdict on ``a`` against ``b`` (same shape and concurrency), read against both spreads and the
    noise floor of the widest fitting control pair."""
    if (a.shape, a.concurrency) != (b.shape, b.concurrency):
        raise InputError(
            f"{a.label} and {b.label} ran different workloads",
            "compare runs of one shape and concurrency: pass --shape and -c",
        )
    for side in (a, b):
        if not side.repeated or side.median is None:
            return Comparison(
                a,
                b,
                "no-verdict",
                None,
                None,
                None,
                f"no verdict: {side.label} has no repeats; {REPEATS_HINT}",
            )
    assert a.median is not None and b.median is not None and a.low is not None and b.low is not None
    winner: Literal["a", "b"] = "a" if a.median >= b.median else "b"
    fast, slow = (a, b) if winner == "a" else (b, a)
    assert fast.median is not None and slow.median is not None and fast.low is not None
    percent = (fast.median / slow.median - 1) * 100 if slow.median > 0 else None
    floor = noise_floor(pairs, a, b)
    apart = f"{_name(fast, winner)} {_pct(percent)} faster than {_name(slow, 'b' if winner == 'a' else 'a')}"
    if slow.high is not None and fast.low <= slow.high:
        return Comparison(
            a, b, "tie", percent, None, floor, f"tie: the difference ({_pct(percent)}) is inside the spread"
        )
    if floor is not None and percent is not None and percent <= floor.floor * 100:
        return Comparison(
            a,
            b,
            "tie",
            percent,
            None,
            floor,
            f"tie: the difference ({_pct(percent)}) is inside the noise floor of "
            f"{floor.floor:.1%} between {floor.a.label} and {floor.b.label}",
        )
    beyond = f" and the noise floor of {floor.floor:.1%}" if floor is not None else ""
    return Comparison(
        a, b, "faster", percent, winner, floor, f"{apart} (outside the measured spread{beyond})"
    )


def _pct(percent: float | None) -> str:
    return "an unmeasurable" if percent is None else f"{percent:.1f}%"


def _name(group: RepeatGroup, side: str) -> str:
    return f"{side.upper()} ({group.arm})"


def resolve_side(
    rows: Sequence[ResultRow],
    spec: str,
    shape: str | None = None,
    concurrency: int | None = None,
    box: str | None = None,
) -> RepeatGroup:
    """What ``campaign compare`` was given as one side: a bench row id or run id (its group, or the lone
    run), a repeat group id, or an arm (its newest group at ``shape``/``concurrency`` on ``box``)."""
    by_group = {g.id: g for g in repeat_groups(rows)}
    if spec in by_group:
        return by_group[spec]
    row = next((r for r in rows if str(r.id) == spec or r.run_id == spec), None)
    if row is not None:
        return by_group[row.repeat_group] if row.repeat_group in by_group else _group(None, [row])
    mine = [
        r
        for r in rows
        if r.arm == spec
        and (box is None or r.box == box)
        and (shape is None or r.shape == shape)
        and (concurrency is None or r.concurrency == concurrency)
    ]
    if not mine:
        at = " ".join(w for w in (shape, concurrency and f"C{concurrency}") if w)
        where = (f" at {at}" if at else "") + (f" on {box}" if box else "")
        raise InputError(
            f"{spec!r} is no bench row, run, repeat group or benched arm{where} in this state.db",
            "`campaign export summary` lists the rows; an arm needs rows at the shape and concurrency",
        )
    workloads = sorted({(r.shape, r.concurrency) for r in mine})
    if len(workloads) > 1:
        listed = ", ".join(f"{s} C{c}" for s, c in workloads)
        raise InputError(f"arm {spec} was benched at {listed}", "choose one with --shape and -c")
    groups = [g for g in repeat_groups(mine) if g.repeated]
    newest = max(mine, key=lambda r: (r.started_ms or 0, r.id))
    if not groups:
        return _group(None, [newest])
    return max(groups, key=lambda g: (g.rows[-1].started_ms or 0, g.rows[-1].id))


def compare(
    store: Store,
    a: str,
    b: str,
    shape: str | None = None,
    concurrency: int | None = None,
    box: str | None = None,
    catalog: Catalog | None = None,
) -> Comparison:
    """``campaign compare A B``: rows, groups or arms, against the noise floor when a control pair exists.

    With ``catalog``, a drafter arm (one with ``--speculative-config``) compares only with its baseline arm
    at the same shape and concurrency: its throughput and TTFT mean nothing against anything else."""
    rows = bench_rows(store)
    groups = repeat_groups(rows)
    side_a = resolve_side(rows, a, shape, concurrency, box)
    drafter = _drafter(catalog, side_a.arm)
    if drafter is None:
        side_b = resolve_side(rows, b, shape, concurrency, box)
        drafter = _drafter(catalog, side_b.arm)
        if drafter is not None and not _is_baseline(catalog, drafter, side_a.arm):
            raise _no_baseline(drafter, side_b, side_a.arm)
    else:  # the baseline is taken at the drafter's shape and concurrency
        try:
            side_b = resolve_side(rows, b, side_a.shape, side_a.concurrency, box)
        except InputError:
            if not _is_baseline(catalog, drafter, b):
                raise
            raise _no_baseline(drafter, side_a) from None
        if not _is_baseline(catalog, drafter, side_b.arm):
            raise _no_baseline(drafter, side_a, side_b.arm)
    return compare_groups(side_a, side_b, control_pairs(groups))


def _drafter(catalog: Catalog | None, arm: str) -> Arm | None:
    found = catalog.arms.get(arm) if catalog is not None else None
    return found if found is not None and found.speculative_config is not None else None


def _is_baseline(catalog: Catalog | None, drafter: Arm, arm: str) -> bool:
    """Whether ``arm`` is the drafter's baseline under any of its names: an alias (``same_as``) is its target's
    configuration, so a drafter row recorded under an alias pairs with its baseline's rows under theirs."""
    if catalog is None or drafter.baseline is None:
        return arm == drafter.baseline
    return catalog.canonical(arm) == catalog.canonical(drafter.baseline)


def _no_baseline(drafter: Arm, side: RepeatGroup, other: str | None = None) -> InputError:
    at = f"{side.shape} -c {side.concurrency}"
    against = (
        f", not {other}" if other is not None else f"; it has no rows at {side.shape} C{side.concurrency}"
    )
    return InputError(
        f"{drafter.name} is a drafter arm: it compares only with its baseline {drafter.baseline}{against}",
        f"bench the baseline alike (`campaign bench {drafter.baseline} --box BOX --shape {at}`) and compare "
        f"`{drafter.name} {drafter.baseline}`",
    )


def standings(rows: Sequence[ResultRow]) -> list[GroupStanding]:
    """Every repeat group with its verdict against the best repeated group of its shape and concurrency:
    what the Results view lists, ties marked. Ordered by shape, concurrency, then median (fastest first)."""
    groups = repeat_groups(rows)
    pairs = control_pairs(groups)
    best: dict[tuple[str, int], RepeatGroup] = {}
    for g in groups:
        held = best.get((g.shape, g.concurrency))
        if g.repeated and g.median is not None and (held is None or g.median > (held.median or 0.0)):
            best[(g.shape, g.concurrency)] = g
    out = []
    for g in sorted(groups, key=lambda g: (g.shape, g.concurrency, -(g.median or 0.0))):
        leader = best.get((g.shape, g.concurrency))
        out.append(
            GroupStanding(g, None if leader is None or leader is g else compare_groups(g, leader, pairs))
        )
    return out
