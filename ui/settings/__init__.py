"""Settings pages (admin only), one module a section: general, egress, providers, notifications, usage
(prices), secrets, tokens, profiles; what they share in forms. (Nodes: ui.node_views.)"""
