"""`campaign bench`: not built yet."""

from console.cli.not_built import placeholder

register = placeholder("bench", 6)
