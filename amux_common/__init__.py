"""Small building blocks shared by every app (no app imports, no domain rules)."""
