"""The learned ranking of a recall's candidates (docs/design.md, "A ranking that learns"):
features.py (what the model reads), learned.py (the model and its checks), order.py (a recall's
order by it)."""
