"""Sans-I/O session state machines: client events in, server events and engine work out."""
