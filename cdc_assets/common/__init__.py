"""What every stage shares: settings, TSO and window arithmetic, types, the Iceberg warehouse, Spark helpers."""
