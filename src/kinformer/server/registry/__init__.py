"""The generic registry: the served resources, the store, strategies, defaults, validation, patches."""
