"""Aliyun DTS Avro."""
