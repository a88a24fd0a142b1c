"""AMQP 1.0 values, message sections and the message view the filters read.

No networking here: this package turns values and bytes into something the
filter engine can ask questions of, keeping *absent* distinct from *default*.
"""
