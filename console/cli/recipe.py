"""`campaign recipe`: not built yet."""

from console.cli.not_built import placeholder

register = placeholder("recipe", 3)
