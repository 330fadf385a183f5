"""`campaign kill`: not built yet."""

from console.cli.not_built import placeholder

register = placeholder("kill", 5)
