"""Pure streaming algorithms: turn segmentation, stable prefixes, append-only deltas."""
