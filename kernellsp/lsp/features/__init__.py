"""Language server features, one module each (esbonio style); each has a ``register(server)``."""
