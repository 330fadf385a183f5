"""The Textual console. The only package that imports Textual; it reads the store and calls the service layer."""
