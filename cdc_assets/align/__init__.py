"""Layer 3: a window's change table (duplicates removed, late events dropped, watermark-aligned)."""
