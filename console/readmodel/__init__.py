"""The console's read side, outside Textual: records, queries over a Store, and the cursor-bearing model.

The TUI, benchmarks and tests read the campaign through here; nothing here writes.
"""

from console.readmodel.inventory import box_list
from console.readmodel.model import WINDOWS_MS, Cursor, ReadModel
from console.readmodel.queries import RESULT_SORTS
from console.readmodel.records import (
    ArmEntry,
    BenchNow,
    CheckMark,
    FleetRow,
    GpuPower,
    LaunchRow,
    LiveView,
    ResultRow,
    Series,
    ServerNow,
    SweepArmRow,
    SweepBench,
    SweepEntry,
    TimerRow,
    TripwireRow,
)

__all__ = [
    "box_list",
    "RESULT_SORTS",
    "WINDOWS_MS",
    "ArmEntry",
    "BenchNow",
    "CheckMark",
    "Cursor",
    "FleetRow",
    "GpuPower",
    "LaunchRow",
    "LiveView",
    "ReadModel",
    "ResultRow",
    "Series",
    "ServerNow",
    "SweepArmRow",
    "SweepBench",
    "SweepEntry",
    "TimerRow",
    "TripwireRow",
]
