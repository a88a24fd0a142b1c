"""Tests of broker/store/: the durable store."""
