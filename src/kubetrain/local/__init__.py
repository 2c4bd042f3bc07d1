"""kubetrain.local."""
