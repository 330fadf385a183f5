"""`campaign export`: not built yet."""

from console.cli.not_built import placeholder

register = placeholder("export", 10)
