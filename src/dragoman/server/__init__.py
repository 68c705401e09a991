"""The transport: the only code that touches sockets."""
