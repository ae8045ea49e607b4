"""Layer 0: dump files into the warehouse's landing tables, incrementally and idempotently."""
