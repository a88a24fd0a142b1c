"""The event loop: python-qpid-proton's reactor with a fast path for deliveries and socket IO
(``fast``), proton's stock ``Container`` (``stock``), the choice between them (``auto``), and the
one module that touches proton's private internals (``proton_internals``).
"""
