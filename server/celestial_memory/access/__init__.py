"""Who may call what: API keys (keys.py) that decide a caller's tenants and role (roles.py)."""
