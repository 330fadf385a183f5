"""``campaign box setup``: the locked serving env built with uv on a real sshd box from a local package index.

The index is real: wheels with the lock's names and versions (metadata only; no code needs to run) served by an
HTTP server on loopback, read by uv as a flat index. The box's driver is the fake nvidia-smi of a GPU fixture.
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.errors import InputError
from console.recipes.serving_lock import parse_lock, shipped_lock
from console.store import Store
from testbed.fleet_fixtures import box_started, fleet_store, register, sshd_farm
from testbed.sshd import SshBox, SshdFarm
from tests.support.cli import run_cli

__all__ = ["fleet_store", "sshd_farm"]

LOCK = shipped_lock().read_text()


def _wheel(where: Path, name: str, version: str, extras: tuple[str, ...] = ()) -> None:
    """A metadata-only wheel: what uv installs and ``uv pip list`` reports."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Provides-Extra: {e}\n" for e in extras
    )
    files = {
        f"{info}/METADATA": metadata,
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}/__init__.py": f"__version__ = {version!r}\n",
    }
    record = "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(where / f"{dist}-{version}-py3-none-any.whl", "w") as z:
        for path, text in {**files, f"{info}/RECORD": record}.items():
            z.writestr(path, text)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The lock's packages, plus a cubin of another FlashInfer version, on an HTTP server on loopback."""
    root = tmp_path_factory.mktemp("index")
    lock = parse_lock(LOCK, "lock")
    extras = dict(lock.extras)
    for name, version in (*lock.packages, *lock.cubin):
        _wheel(root, name, version, extras.get(name, ()))
    _wheel(root, "flashinfer-cubin", "0.6.17")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _box(store: Store, name: str, fixture: str) -> SshBox:
    """A started box with uv on its PATH (its bin/, beside the fake nvidia-smi)."""
    import uv

    box = box_started(name, fixture)
    shutil.copy(uv.find_uv_bin(), box.root / "bin" / "uv")
    register(store, box)
    return box


def _uv_commands(store: Store, box: str) -> list[list[str]]:
    """The argv of every uv step sent to the box, in order."""
    rows = store.rows(
        "SELECT args FROM commands WHERE box = ? AND op = 'uv' ORDER BY created_ms, rowid", [box]
    )
    return [json.loads(r["args"])["args"] for r in rows]


@pytest.mark.sshd
@pytest.mark.timeout(300)
def test_setup_installs_then_changes_nothing_and_sets_the_serving_env(
    sshd_farm: SshdFarm, fleet_store: Store, index: str, tmp_path: Path
) -> None:
    box = _box(fleet_store, "setup-h200", "h200")
    env = box.home / "env-ok"
    db = tmp_path / "state.db"
    code, out, err = run_cli(
        db, "box", "setup", box.name, "--env-dir", str(env), "--index", index, "--dry-run"
    )
    assert code == 0, err
    assert "would run the steps below" in out and f"uv venv {env}" in out
    assert not env.exists()
    code, out, err = run_cli(db, "box", "setup", box.name, "--env-dir", str(env), "--index", index)
    assert code == 0, err
    assert "installed the locked serving environment" in out
    assert "uv pip install" in out and "flashinfer-cubin==0.6.18" in out
    assert fleet_store.boxes.get(box.name).serving_env == str(env)
    assert fleet_store.boxes.get(box.name).engine_versions["flashinfer-cubin"] == "0.6.18"  # with the box
    assert sorted(p.name for p in (env / "lib").glob("python3*/site-packages/flashinfer_cubin-*")) == [
        "flashinfer_cubin-0.6.18.dist-info"
    ]

    before = _uv_commands(fleet_store, box.name)
    assert [a[:2] for a in before].count(["pip", "install"]) == 2
    code, out, err = run_cli(db, "box", "setup", box.name, "--index", index, "--json")
    assert code == 0, err
    assert '"action": "unchanged"' in out and '"steps": []' in out
    assert '"torch": "2.13.0+cu130"' in out
    assert [a[:2] for a in _uv_commands(fleet_store, box.name)[len(before) :]] == [["pip", "list"]]


@pytest.mark.sshd
@pytest.mark.timeout(300)
def test_a_driver_too_old_for_the_locks_cuda_is_refused_before_anything_is_installed(
    sshd_farm: SshdFarm, fleet_store: Store, index: str, tmp_path: Path
) -> None:
    box = _box(fleet_store, "setup-5090", "rtx5090-575-cu130")
    env = box.home / "env-refused"
    code, out, err = run_cli(
        tmp_path / "state.db", "box", "setup", box.name, "--env-dir", str(env), "--index", index
    )
    assert code == 2
    assert "driver 575.57.08 supports CUDA 12.9, the lock needs CUDA 13.0" in err
    assert "error 804" in err
    assert not env.exists()
    assert _uv_commands(fleet_store, box.name) == []
    assert fleet_store.boxes.get(box.name).serving_env is None


@pytest.mark.sshd
@pytest.mark.timeout(300)
def test_a_cubin_of_another_flashinfer_version_is_caught_after_install(
    sshd_farm: SshdFarm, fleet_store: Store, index: str, tmp_path: Path
) -> None:
    box = _box(fleet_store, "setup-h200", "h200")
    env = box.home / "env-mismatch"
    lock = tmp_path / "mismatch.lock"
    lock.write_text(LOCK.replace('flashinfer-cubin = "0.6.18"', 'flashinfer-cubin = "0.6.17"'))
    code, out, err = run_cli(
        tmp_path / "state.db",
        "box",
        "setup",
        box.name,
        "--env-dir",
        str(env),
        "--index",
        index,
        "--lock",
        str(lock),
    )
    assert code == 1
    assert "kernel binaries mismatch: flashinfer-cubin 0.6.17 but flashinfer-python 0.6.18" in err
    assert (env / "bin" / "python").exists()  # it was caught after installing
    assert fleet_store.boxes.get(box.name).serving_env is None


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ('vllm = "0.32.0"', 'vllm = ">=0.32"', "packages.vllm: '>=0.32' is not one exact version"),
        ('vllm = "0.32.0"', 'vllm = "0.32.0; rm -rf ~"', "is not one exact version"),
        ('vllm = "0.32.0"', 'vllm = "0.32.0 --index-url http://x"', "is not one exact version"),
        ('cuda = "13.0"', 'cuda = "14.7"', "cuda: '14.7' is not in the minimum-driver table"),
        (
            'cubin_index_url = "https://flashinfer.ai/whl/"',
            'cubin_index_url = "$(curl x)"',
            "is not an http(s)",
        ),
        ("[extras]", "[extrass]", "extrass: unknown key"),
    ],
)
def test_hostile_lock_values_are_refused_with_one_line(old: str, new: str, said: str) -> None:
    assert old in LOCK
    with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)")) as caught:
        parse_lock(LOCK.replace(old, new), "x.lock")
    assert "\n" not in caught.value.message and caught.value.message.startswith("x.lock: ")


_TOKEN = st.one_of(
    st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,3}(rc[0-9])?(\+cu[0-9]{3})?", fullmatch=True),
    st.text(max_size=20),
)


@given(_TOKEN)
def test_any_version_text_is_pinned_exactly_or_refused_in_one_line(version: str) -> None:
    """Whatever text stands for a version, the lock either pins it as one argv-safe token or refuses it."""
    text = LOCK.replace('vllm = "0.32.0"', "vllm = " + _toml_string(version))
    try:
        lock = parse_lock(text, "x.lock")
    except InputError as exc:
        assert "\n" not in exc.message and exc.message.startswith("x.lock: ")
        return
    pinned = lock.pins["vllm"]
    assert pinned == version
    assert all(c.isalnum() or c in ".+" for c in pinned)
    assert lock.specs(lock.packages)[0] == f"vllm[b12x]=={version}"


def _toml_string(text: str) -> str:
    escaped = "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}" for c in text)
    return f'"{escaped}"'


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--env-dir", "relative/env"], "--env-dir 'relative/env': not a plain absolute path"),
        (["--env-dir", "/opt/env;reboot"], "not a plain absolute path"),
        (["--env-dir", "/opt/../etc"], "not a plain absolute path"),
        ([], "box far: no serving env to set up"),
        (
            ["--env-dir", "/opt/env", "--index", "ftp://x"],
            "--index 'ftp://x': not an http(s):// or file:// URL",
        ),
    ],
)
def test_bad_setup_input_is_refused_before_the_box_is_contacted(
    tmp_path: Path, flags: list[str], said: str
) -> None:
    db = tmp_path / "state.db"
    assert run_cli(db, "box", "add", "far", "--ssh", "op@192.0.2.1")[0] == 0
    code, out, err = run_cli(db, "box", "setup", "far", *flags)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1
    assert Store(db).scalar("SELECT count(*) FROM commands") == 0
