"""The torch engine's adapter (backend.py) and what it needs."""
