"""Relay mode (``--upstream``): the nodes live on another broker; our links are fed by and feed
upstream links, with the same filters evaluated here (and pushed down where exact).
"""
