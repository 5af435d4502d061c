"""The command line (click, rich, jinja2): never imported by ``import aeon_kernel`` or by an embedding program."""
