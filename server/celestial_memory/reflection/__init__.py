"""Reflection: insights about a tenant's recent memories, by the model (reflector.py)."""
