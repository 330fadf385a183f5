"""The console's side of every box: SSH links, agent push, exactly-once journal ingest, commands.

fleet = FleetManager(store)
link = fleet.start("pro-a")          # supervised: connect, ingest, reconnect with backoff
await link.command("probe", {...})   # stored before sending, re-sent safely after a reconnect
port = await link.forward(8100)      # a console-side port reaching 127.0.0.1:8100 on the box
"""

from console.fleet.hostkeys import HostKeyChanged, HostKeyProblem, HostKeyUnknown
from console.fleet.link import BoxLink, JournalMismatch, LinkSettings
from console.fleet.manager import FleetManager
from console.fleet.transport import SshSettings
from console.fleet.wire import AgentError

__all__ = [
    "AgentError",
    "BoxLink",
    "FleetManager",
    "HostKeyChanged",
    "HostKeyProblem",
    "HostKeyUnknown",
    "JournalMismatch",
    "LinkSettings",
    "SshSettings",
]
