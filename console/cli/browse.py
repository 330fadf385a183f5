"""`campaign browse`: not built yet."""

from console.cli.not_built import placeholder

register = placeholder("browse", 9)
