"""One module per layer of the asset graph."""
