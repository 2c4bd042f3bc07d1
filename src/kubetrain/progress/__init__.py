"""kubetrain.progress."""
