"""Nodes and the links on them: queues and topics, their entries, the consumers and producers
that send and receive on them, and the address space (``registry``) that creates nodes on
first use. Filtering goes through the plugin's node matcher; nothing here decodes a filter.
"""
