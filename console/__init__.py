"""campaign-console: the laptop side of a GPU inference-benchmark campaign.

The core (everything here but ``console.tui``) imports without Textual, so the CLI, scripts and the TUI
share one implementation.
"""

__version__ = "0.1.0"
