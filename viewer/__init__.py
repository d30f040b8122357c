"""gradtrace viewer package."""
