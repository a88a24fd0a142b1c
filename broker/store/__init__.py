"""``--data-dir``: one CRC-checked, group-committed append-only log per durable node, and the
recovery that replays them into the address space at start.
"""
