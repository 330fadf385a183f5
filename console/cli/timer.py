"""`campaign timer`: not built yet."""

from console.cli.not_built import placeholder

register = placeholder("timer", 8)
