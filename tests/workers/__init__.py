"""Small programs the reliability tests start as real processes (never threads)."""
