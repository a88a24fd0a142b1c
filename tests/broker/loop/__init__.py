"""Tests of broker/loop/: the event loops."""
