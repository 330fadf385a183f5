"""The Textual console: the only package that imports Textual. It reads the store, calls the service layer."""
