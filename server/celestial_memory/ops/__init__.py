"""The operator's side: the /metrics and /orrery port (http.py, orrery/), the container's health
probe and the writer of the configuration reference."""
