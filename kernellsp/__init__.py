"""kernellsp: a language server and CLI that makes CUDA kernels fast and keeps them correct.

The core (this package minus ``cli`` and ``lsp``) never imports pygls or typer: the command line
and the language server are thin adapters over the same functions.
"""

__version__ = "0.1.0"
