"""Text-to-speech: the engine interface, its backends, the voice catalog and the shared speaker."""
