"""Stage 4, metrics to findings: the metric registry and the rule engine over the TOML rule files."""
