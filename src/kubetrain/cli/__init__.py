"""kubetrain.cli."""
