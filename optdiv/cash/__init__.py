"""cash."""
