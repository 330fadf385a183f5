"""`campaign demo`: not built yet."""

from console.cli.not_built import placeholder

register = placeholder("demo", 10)
