"""Tests of broker/archive/: archiving to Parquet."""
