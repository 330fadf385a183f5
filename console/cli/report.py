"""`campaign report`: not built yet."""

from console.cli.not_built import placeholder

register = placeholder("report", 10)
