"""kubetrain.api."""
