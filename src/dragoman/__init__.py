"""dragoman: a self-hosted realtime speech server."""

__version__ = "0.1.0"
