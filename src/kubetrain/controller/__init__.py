"""kubetrain.controller."""
