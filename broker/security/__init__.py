"""Who may connect and what they may do: TLS, the SASL exchange, the users file, address
permissions checked at attach and per relayed message, and the settings' checks.
"""
