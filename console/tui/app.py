"""The console application (placeholder screen until the views land)."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult
from textual.widgets import Footer, Header, Static

from console.store import Store


class ConsoleApp(App[None]):
    TITLE = "campaign"
    BINDINGS = [("q", "quit", "quit")]

    def __init__(self, db_path: Path):
        super().__init__()
        self.db_path = db_path

    def compose(self) -> ComposeResult:
        yield Header()
        with Store(self.db_path, read_only=True) as store:
            boxes = ", ".join(b.name for b in store.boxes.list()) or "none"
        yield Static(f"state.db: {self.db_path}\nboxes: {boxes}\n\nThe views are being built; q quits.")
        yield Footer()


def run_console(db_path: Path) -> int:
    ConsoleApp(db_path).run()
    return 0
