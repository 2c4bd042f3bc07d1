"""kubetrain.runtime."""
