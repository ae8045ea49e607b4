"""Layer 4: every table's state at each window end, its history, and reads at any instant."""
