"""gradtrace cli package."""
