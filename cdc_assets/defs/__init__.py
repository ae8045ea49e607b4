"""Dagster wiring: one module per layer; pure logic lives in the stage packages (landing, decode, align, snapshot, common)."""
