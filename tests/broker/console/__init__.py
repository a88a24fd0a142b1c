"""Tests of broker/console/: the management console, its JSON API and its page."""
