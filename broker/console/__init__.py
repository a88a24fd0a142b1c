"""The management console (``--console HOST:PORT``): a web page and the JSON API behind it.

Read-only by construction: the API reads the broker's nodes, links and counters on the
reactor thread (``Broker.call_on_reactor``) and changes nothing; the page (``static/``)
uses only that API. docs/CONSOLE.md documents both.
"""
