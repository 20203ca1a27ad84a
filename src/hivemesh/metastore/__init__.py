"""The local metastore: an HMS-compatible catalog persisted in SQLite or PostgreSQL."""
