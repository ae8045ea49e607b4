"""TiCDC's Debezium protocol and Debezium's own JSON envelope."""
