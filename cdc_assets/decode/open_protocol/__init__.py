"""TiCDC Open Protocol (binary batched key/value)."""
