"""Tests of broker/nodes/: queues, topics, consumers, the door check, the memory budget."""
