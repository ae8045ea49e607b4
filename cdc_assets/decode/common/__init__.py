"""Decoding code several protocols share."""
