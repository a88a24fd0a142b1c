"""Tests of broker/security/: SASL, TLS, users and grants."""
