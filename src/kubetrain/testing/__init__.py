"""kubetrain.testing."""
