"""kubetrain.client."""
