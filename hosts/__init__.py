"""hosts package."""
