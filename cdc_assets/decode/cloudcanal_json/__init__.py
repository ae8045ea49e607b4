"""CloudCanal JSON."""
