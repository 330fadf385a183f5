"""`campaign check`: not built yet."""

from console.cli.not_built import placeholder

register = placeholder("check", 7)
