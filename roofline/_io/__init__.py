"""A report as a JSON document: written, read back, checked against the schema."""
