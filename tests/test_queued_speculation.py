"""The write-up's drafter figures beside their rows: GLM's MTP head drafts 3 tokens and 10% were accepted at C1024
(67% at low concurrency, a reading with no row), DeepSeek's DSpark drafts 7 and 37% were accepted."""

from __future__ import annotations

import shutil
import tempfile
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.readmodel import ResultRow, bench_rows
from console.store import Store
from ops.demo import SEED_DIR, DemoDataError, build_demo, load_payload

HEADER = "arm\tbox\tdraft_tokens\tacceptance\tshape\tconcurrency\tnote\n"
GLM = "glm-5.3-flash-tp4-mtp\tseed-pro6000-600w"


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, int], ResultRow]:
    path = tmp_path_factory.mktemp("speculation") / "state.db"
    with Store(path) as store:
        build_demo(store)
        return {(r.arm, r.shape, r.concurrency): r for r in bench_rows(store)}


def test_the_drafters_published_figures_are_shown_with_their_rows(
    rows: dict[tuple[str, str, int], ResultRow],
) -> None:
    glm = rows[("glm-5.3-flash-tp4-mtp", "router", 1024)]
    assert (glm.spec_tokens, glm.spec_acceptance_published) == (3, 0.10)
    assert glm.speculation == "3 draft tokens per step, accepted 10% (as published, no counters)"
    assert (
        "also published: 3 draft tokens, 67% accepted (the 67% acceptance seen earlier was at low concurrency)"
        in (glm.provenance or "")
    )
    for shape, c in (("router", 256), ("promptopt", 1024)):
        dspark = rows[("deepseek-v4-flash-tp4-b12x-dspark", shape, c)]
        assert (dspark.spec_tokens, dspark.spec_acceptance_published) == (7, 0.37)
        assert dspark.speculation.startswith("7 draft tokens per step, accepted 37%")
    control = rows[("deepseek-v4-flash-tp4-b12x-256", "router", 256)]
    assert (control.spec_tokens, control.spec_acceptance_published, control.speculation) == (None, None, "")


def _seed_with(speculation: str) -> Path:
    tmp = Path(tempfile.mkdtemp())
    with resources.as_file(SEED_DIR) as seed:
        copy = Path(shutil.copytree(seed, tmp / "seed"))
    (copy / "speculation.tsv").write_text("# test\n" + HEADER + speculation, encoding="utf-8")
    return copy


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (f"{GLM}\t3\t1.5\t\t\tx\n", "acceptance 1.5: give at least one token per step"),
        (f"{GLM}\t0\t0.5\t\t\tx\n", "0 draft tokens"),
        (f"{GLM}\t3\t0.1\trouter\t\tx\n", "give both shape and concurrency"),
        (f"{GLM}\t3\t0.1\trouter\t64\tx\n", "throughput.tsv has no row of glm-5.3-flash-tp4-mtp"),
        ("nope\tseed-pro6000-600w\t3\t0.1\t\t\tx\n", "arm nope on seed-pro6000-600w is not in arms.tsv"),
        (f"{GLM}\tthree\t0.1\t\t\tx\n", "column 'draft_tokens' is 'three', expected a int"),
    ],
)
def test_a_bad_speculation_row_is_refused_at_its_line(line: str, error: str) -> None:
    seed = _seed_with(line)
    try:
        with pytest.raises(DemoDataError, match=r"^speculation.tsv:3: .*" + error.replace("(", r"\(")):
            load_payload(seed)
    finally:
        shutil.rmtree(seed.parent)


@settings(max_examples=40, deadline=None)
@given(share=st.floats(allow_nan=True, allow_infinity=True) | st.floats(min_value=0, max_value=1))
def test_any_acceptance_is_a_share_of_drafted_tokens_or_refused(share: float) -> None:
    seed = _seed_with(f"{GLM}\t3\t{share!r}\t\t\tx\n")
    try:
        if 0 <= share <= 1:
            [row] = [r for r in load_payload(seed).bench_runs if r["arm"] == "glm-5.3-flash-tp4-mtp"]
            assert row.get("spec_acceptance_published") == share and row.get("spec_tokens") == 3
        else:
            with pytest.raises(DemoDataError, match=r"^speculation.tsv:3: "):
                load_payload(seed)
    finally:
        shutil.rmtree(seed.parent)
