"""`campaign launch`: not built yet."""

from console.cli.not_built import placeholder

register = placeholder("launch", 5)
