"""Arms: the recipes' arms against the boxes. `l` launches (lint first), `k` kills (always confirms), `b`
benches the selected arm's serving launch (shape and concurrency asked first), `t` runs its tripwire.

The selected arm's latest launch shows its state, kernel lines, failure reason and the tail of its
server log. The log stays on the box (only its path is in state.db), so the live console asks the box
for the tail through the service once per selected launch (`o` asks again); browsing is offline and
says where the log lives instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.widgets import DataTable, Static

from console.errors import ConsoleError
from console.readmodel import ArmEntry, LaunchRow
from console.recipes import RecipeError
from console.store import LOCAL_BOX
from console.tui import keymap
from console.tui.actions import LintLine
from console.tui.modals import BenchScreen, ConfirmScreen
from console.tui.views.base import TableView, fill_table, toned

COLUMNS = ("arm", "state", "box", "launch")
LOG_LINES = 12


UNDRIVABLE = ("imported", "destroyed")
"""Box states with no machine to launch on: the demo's imported figures, a destroyed rental."""


@dataclass(frozen=True)
class ArmsData:
    entries: list[ArmEntry]
    recipes_problem: str | None
    drivable: tuple[str, ...]  # boxes a launch can reach (not imported figures, not destroyed)
    aliases: tuple[tuple[str, str], ...] = ()  # (alias, the arm whose settings it is)


class ArmsScreen(TableView):
    VIEW = "arms"
    TITLE_TEXT = "Arms"
    BINDINGS = keymap.bindings("arms")

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[ArmEntry] = []
        self.selected: str | None = None
        self.problem: str | None = None
        self.tails: dict[str, list[str] | str] = {}  # launch id -> its log tail, or why it could not be read
        self.asked: set[str] = set()
        self.drivable: tuple[str, ...] = (LOCAL_BOX,)
        self.aliases: dict[str, str] = {}

    def load(self) -> ArmsData:
        recipes = self.console.recipes()
        drivable = tuple(r.name for r in self.console.model.fleet() if r.status not in UNDRIVABLE)
        return ArmsData(self.console.model.arms(recipes.arms), recipes.problem, drivable, recipes.aliases)

    def target(self) -> str:
        """Where `l` launches: the selected box when something can run there, else the box this console last
        launched on, else this machine (never the demo's imported figures)."""
        app = self.console
        for box in (app.selected_box, app.last_target):
            if box is not None and box in self.drivable:
                return box
        return LOCAL_BOX

    def topbar_extra(self) -> str:
        return f"target box {self.target()} (, . change)" + (
            f" | {super().topbar_extra()}" if self.filter_text else ""
        )

    def show(self, data: ArmsData) -> None:
        needle = self.filter_text.lower().strip()
        self.problem = data.recipes_problem
        self.drivable = data.drivable or (LOCAL_BOX,)
        self.aliases = dict(data.aliases)
        self.query_one("#topbar", Static).update(
            self.topbar()
        )  # the target box depends on the boxes just read
        self.entries = [e for e in data.entries if not needle or needle in f"{e.name} {e.model}".lower()]
        names = [e.name for e in self.entries]
        if self.selected not in names:
            self.selected = names[0] if names else None
        rows = []
        for e in self.entries:
            last = e.latest
            label = e.name + ("" if e.in_recipes else " (not in recipes)")
            rows.append(
                (
                    [
                        label,
                        toned(last.state) if last else "-",
                        last.box if last else "-",
                        last.id if last else "-",
                    ],
                    e.name,
                )
            )
        with self.app.batch_update():
            fill_table(self.table, COLUMNS, rows, self.selected)
        self.show_detail()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value:
            self.selected = event.row_key.value
            self.show_detail()

    def entry(self) -> ArmEntry | None:
        return next((e for e in self.entries if e.name == self.selected), None)

    def show_detail(self) -> None:
        lines = [self.problem] if self.problem else []
        e = self.entry()
        if e:
            lines.append(f"{e.name}  model {e.model or '-'}")
            if e.name in self.aliases:
                lines.append(
                    f"alias of {self.aliases[e.name]}: its settings and plan, launched under this name"
                )
            last = e.latest
            if last is None:
                lines.append("never launched")
            else:
                lines.append(
                    f"launch {last.id} on {last.box}: {last.state}, GPUs {list(last.gpus)}, port {last.port}"
                    + (" (forced past a failed check)" if last.forced else "")
                )
                if last.failure_reason:
                    lines.append(f"failed: {last.failure_reason}")
                if last.backends_accepted:
                    lines.append(f"engine accepts: {', '.join(last.backends_accepted)}")
                lines += [f"  {cat:9} {line}" for cat, line in last.kernel_lines]
                lines += self.log_lines(last)
        self.detail.update("\n".join(lines))

    def log_lines(self, launch: LaunchRow) -> list[str]:
        if self.console.read_only:
            where = f"at {launch.log_path}" if launch.log_path else "(path not recorded yet)"
            return [
                f"log: on box {launch.box} {where}; browse is offline, `campaign --db "
                f"{self.console.db_path}` shows its tail"
            ]
        tail = self.tails.get(launch.id)
        if tail is None:
            if launch.id not in self.asked:
                self.fetch_tail(launch.id)
            return [f"log tail: asking box {launch.box}..."]
        if isinstance(tail, str):
            return [f"log tail: {tail}" + (f" (log at {launch.log_path})" if launch.log_path else "")]
        head = f"log tail ({launch.log_path or 'on the box'}; o fetches again):"
        return [head, *(f"  {line}" for line in tail or ["(empty)"])]

    def fetch_tail(self, launch_id: str) -> None:
        """One request per launch (a worker, never the UI thread); `o` clears it to ask again."""
        self.asked.add(launch_id)

        async def fetch() -> None:
            try:
                self.tails[launch_id] = await self.console.actions.log_tail(launch_id, LOG_LINES)
            except ConsoleError as exc:  # an unreachable box is shown, it must not close the console
                self.tails[launch_id] = f"unavailable ({exc})"
            self.show_detail()

        self.run_worker(fetch(), group="log-tail")

    def action_log_tail(self) -> None:
        e = self.entry()
        if self.console.refuse_if_read_only("fetching a log tail") or e is None or e.latest is None:
            return
        self.tails.pop(e.latest.id, None)
        self.asked.discard(e.latest.id)
        self.show_detail()

    # -- actions ----------------------------------------------------------------------------------------
    def action_launch(self) -> None:
        app = self.console
        if app.refuse_if_read_only("launching"):
            return
        e, box = self.entry(), self.target()
        if e is None:
            app.say("pick an arm here first (and a box in Fleet, 1, or with , and .)", "warning")
            return
        self.run_worker(lambda: self._lint_then_confirm(e.name, box), thread=True, group="lint")

    def _lint_then_confirm(self, arm: str, box: str) -> None:
        try:
            findings = self.console.actions.lint(arm, box)
        except RecipeError as exc:  # shown as the lint it is: a broken recipe must not close the console
            findings = [LintLine("error", "recipe", str(exc))]
        except ConsoleError as exc:  # not lint: an unknown or unreachable box says so, as itself
            self.app.call_from_thread(self.console.say, f"launch {arm} on {box}: {exc}", "error")
            return
        self.app.call_from_thread(self._confirm_launch, arm, box, findings)

    def _confirm_launch(self, arm: str, box: str, findings: list[LintLine]) -> None:
        app = self.console
        blocked = any(f.blocking for f in findings)
        body = [
            f"{f.severity.upper():5} {f.rule_id}: {f.reason}" + (f" ({f.where})" if f.where else "")
            for f in findings
        ] or ["lint: no findings"]
        title = f"Launch {arm} on {box}?" if not blocked else f"Launch of {arm} on {box} is blocked by lint"

        def answered(yes: bool | None) -> None:
            if yes:
                app.last_target = box
                app.run_action_worker(app.actions.launch(box, arm), f"launch {arm} on {box}")

        app.push_screen(ConfirmScreen(title, body, allow_yes=not blocked), answered)

    def action_kill(self) -> None:
        app = self.console
        if app.refuse_if_read_only("killing"):
            return
        e = self.entry()
        alive = [launch for launch in (e.launches if e else []) if launch.alive]
        if not alive:
            app.say(f"{self.selected or 'no arm'}: nothing running to kill", "warning")
            return
        target = alive[-1]
        body = [
            f"launch {target.id} of {target.arm}",
            f"box {target.box}, GPUs {list(target.gpus)}, pid {target.pid}",
            "the server is stopped and its GPU memory checked free",
        ]

        def answered(yes: bool | None) -> None:
            if yes:
                app.run_action_worker(
                    app.actions.kill(target.box, target.id), f"kill {target.id} on {target.box}"
                )

        app.push_screen(ConfirmScreen(f"Kill {target.id} on {target.box}?", body), answered)

    def serving(self, verb: str) -> LaunchRow | None:
        """The selected arm's newest serving launch, or None after saying why there is none."""
        app = self.console
        if app.refuse_if_read_only(verb):
            return None
        e = self.entry()
        serving = [launch for launch in (e.launches if e else []) if launch.state == "serving"]
        if not serving:
            app.say(
                f"{self.selected or 'no arm'}: no serving launch to measure; launch it first (l)", "warning"
            )
            return None
        return serving[-1]

    def action_bench(self) -> None:
        app = self.console
        launch = self.serving("benchmarking")
        if launch is None:
            return

        def asked(answer: tuple[str, int] | None) -> None:
            if answer is not None:
                shape, concurrency = answer
                app.say(
                    f"bench {launch.id} {shape} C{concurrency}: running on {launch.box}; Live charts its progress"
                )
                app.run_action_worker(
                    app.actions.bench(launch.id, launch.box, shape, concurrency), f"bench {launch.id}"
                )

        shapes = app.recipes().shapes  # read by this view's load, on its worker: no file is read here
        app.push_screen(BenchScreen(f"{launch.arm} ({launch.id} on {launch.box})", shapes), asked)

    def action_tripwire(self) -> None:
        app = self.console
        launch = self.serving("running the tripwire")
        if launch is None:
            return
        what = f"tripwire {launch.id}"
        app.say(f"{what}: running on {launch.box}")
        app.run_action_worker(app.actions.tripwire(launch.id, launch.box), what)
