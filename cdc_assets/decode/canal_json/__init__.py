"""TiCDC Canal-JSON (`_tidb` extension, watermarks) and official Canal's flat messages."""
