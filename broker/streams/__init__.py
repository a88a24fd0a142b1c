"""Stream nodes: append-only logs that filtered consumers read from any offset.

``annotate`` (a delivered copy with its ``x-stream-offset``), ``log`` (segments, retention by
bytes and age, the memory budget), ``durable`` (the log on disk with ``--data-dir``) and
``segment_file`` (its files' records), ``node`` (the :class:`Stream` node and its readers).
"""
