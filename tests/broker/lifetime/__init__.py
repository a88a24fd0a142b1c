"""Message lifetime over real sockets: expiry, dead-lettering of expired messages, scheduled
delivery (broker/nodes/lifetime.py, broker/nodes/deadlines.py)."""
