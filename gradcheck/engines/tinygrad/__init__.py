"""The tinygrad engine's adapter (backend.py) and what it needs."""
