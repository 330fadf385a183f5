"""`campaign tripwire`: not built yet."""

from console.cli.not_built import placeholder

register = placeholder("tripwire", 6)
