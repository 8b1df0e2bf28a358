"""Leaves of the package: number and duration formatting, the one file writer, JSON parsing with a nesting limit,
cache-directory trust checks, the version. They import nothing of roofline."""
