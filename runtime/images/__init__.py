"""sunk's images: recipes (one folder per layer) and the daemonless builder."""
