"""What every layer reports: Prometheus metrics, OpenTelemetry spans and JSON logs."""
