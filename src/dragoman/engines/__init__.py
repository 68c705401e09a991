"""Engine interfaces (ASR, MT) and one module per backend, imported only when chosen."""
