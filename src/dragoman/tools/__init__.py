"""Command-line tools above the serving stack: they may import any layer, none imports them."""
