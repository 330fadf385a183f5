"""`campaign sweep`: not built yet."""

from console.cli.not_built import placeholder

register = placeholder("sweep", 11)
