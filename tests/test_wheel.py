"""The built wheel, installed into a fresh venv and run from a folder outside the repository, works.

Integration test (part of CI): it builds the wheel from this checkout without build isolation (no
network: the test extra brings a setuptools that builds wheels), installs it with ``--no-deps`` into a
venv made WITHOUT ``--system-site-packages``, and runs ``campaign`` from a temporary working directory.

Where the dependencies come from, offline: a ``.pth`` file in the venv's site-packages names the folders
that hold the wheel's installed dependencies in the environment running the test (found from the wheel's
own ``Requires-Dist`` through ``importlib.metadata``). Why not ``--system-site-packages``: inside a venv it
means the *base* interpreter's packages, not this environment's, so a newcomer testing in a venv had no
``sqlite_utils``. Why not wheels of the installed dependencies: pip cannot make a wheel of an installed
distribution, and ``pip wheel``/``pip download`` would reach the network. A ``.pth`` line only appends its
folder to ``sys.path`` after the venv's own site-packages, so the wheel's copy is found first, and the
``.pth`` files *inside* that folder are not run: the checkout's editable install (its ``__editable__``
finder) stays invisible, which the first test proves. It works the same from a venv, the system Python or
a user install, copies nothing and downloads nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@dataclass(frozen=True)
class Installed:
    venv: Path
    workdir: Path
    env: dict[str, str]

    def run(self, *argv: str) -> str:
        """``campaign ARGV`` from the venv, in the work folder; its stdout, after asserting it succeeded."""
        done = subprocess.run(
            [str(self.venv / "bin" / "campaign"), *argv],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"campaign {' '.join(argv)}: exit {done.returncode}\n{done.stderr}"
        return done.stdout


def _source_copy(dest: Path) -> Path:
    """The working tree as git would commit it (tracked and new files, nothing ignored), copied to ``dest``.

    The build writes ``build/`` and ``*.egg-info`` next to its sources; a copy keeps them out of the checkout.
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # a file deleted but not yet committed is still listed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def _requires(wheel: Path) -> list[str]:
    """The wheel's ``Requires-Dist`` lines, read from its own METADATA."""
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return HeaderParser().parsestr(z.read(name).decode()).get_all("Requires-Dist") or []


def _dependency_dirs(requires: list[str]) -> list[Path]:
    """The folders that hold ``requires`` and everything they require, as installed where the test runs."""
    dirs: dict[Path, None] = {}
    seen: set[str] = set()
    todo = [(Requirement(line), "") for line in requires]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue  # another platform's, or an extra nobody asked for
        key = f"{req.name.lower().replace('_', '-')}[{','.join(sorted(req.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            pytest.fail(
                f"{req} is not installed here; install the test environment first: pip install -e '.[test]'"
            )
        assert req.specifier.contains(dist.version, prereleases=True), f"{req}: {dist.version} is installed"
        dirs[Path(str(dist.locate_file(""))).resolve()] = None
        todo += [(Requirement(line), e) for line in dist.requires or [] for e in ("", *sorted(req.extras))]
    assert not any(d.is_relative_to(ROOT) for d in dirs), dirs  # never the checkout itself
    return list(dirs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    source = _source_copy(base / "src")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(base / "dist"),
            str(source),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = (base / "dist").glob("campaign_console-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    site = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    dirs = _dependency_dirs(_requires(wheel))
    (Path(site) / "_campaign_test_dependencies.pth").write_text("".join(f"{d}\n" for d in dirs))
    # This environment's pip installs into the venv (--python): the venv itself has none.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    workdir, home = base / "elsewhere", base / "home"
    workdir.mkdir()
    home.mkdir()
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR")
    # No PYTHONPATH (it would put a checkout first), no user recipes, no $CAMPAIGN_DB.
    env = {k: v for k, v in os.environ.items() if k in keep} | {"HOME": str(home)}
    return Installed(venv, workdir, env)


PROBE = """
import json, agents, console, ops, recipes
from importlib import resources
print(json.dumps({"modules": [m.__file__ for m in (agents, console, ops, recipes)],
                  "tcss": resources.files("console.tui").joinpath("console.tcss").is_file()}))
"""


def test_the_commands_import_the_wheels_copy_not_the_checkout(installed: Installed) -> None:
    done = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c", PROBE],
        cwd=installed.workdir,
        env=installed.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    found = json.loads(done.stdout)
    site = installed.venv / "lib"
    for file in found["modules"]:
        assert Path(file).is_relative_to(site) and not Path(file).is_relative_to(ROOT), file
    assert found["tcss"], "the TUI's stylesheet (CSS_PATH in console/tui/app.py) is not in the wheel"


def test_recipe_list_reads_the_shipped_recipes(installed: Installed) -> None:
    rows = {r["arm"]: r for r in json.loads(installed.run("recipe", "list", "--json"))}
    assert {"tiny-cpu", "qwen3.8-27b-nvfp4-b12x", "glm-5.3-flash-dp4-ep", "gpt-oss-120b-tp4"} <= set(rows)
    assert {r["source"] for r in rows.values()} == {"shipped"}
    assert rows["tiny-cpu"]["argv"][1] == "serve" and rows["tiny-cpu"]["argv"][2].endswith("/tiny-llama")
    table = installed.run("recipe", "list")
    assert "qwen3.8-27b-nvfp4-auto" in table and "1 error" in table  # lint ran against the shipped vLLM flags


def test_user_recipes_layer_on_the_installed_ones(installed: Installed) -> None:
    config = Path(installed.env["HOME"]) / ".config"
    mine = config / "campaign-console" / "recipes" / "arms" / "mine.toml"
    mine.parent.mkdir(parents=True)
    mine.write_text('[arms."my-tiny"]\nprofile = "tiny-llama"\n')
    try:
        rows = {r["arm"]: r for r in json.loads(installed.run("recipe", "list", "--json"))}
    finally:
        shutil.rmtree(config)
    assert rows["my-tiny"]["source"] == str(mine) and rows["tiny-cpu"]["source"] == "shipped"


def test_demo_then_export_summary(installed: Installed) -> None:
    db = installed.workdir / "demo.db"
    out = installed.run("--db", str(db), "demo")
    assert "111 throughput rows" in out
    lines = installed.run("--db", str(db), "export", "summary").splitlines()
    header = lines[0].split("\t")
    rows = [dict(zip(header, line.split("\t"), strict=True)) for line in lines[1:]]
    assert len(rows) == 111 and {r["source"] for r in rows} == {"imported"}
    assert any(r["arm"] == "qwen3.8-27b-nvfp4-b12x" and r["box"] == "seed-pro6000-600w" for r in rows)
