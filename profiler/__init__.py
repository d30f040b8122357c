"""gradtrace profiler package."""
