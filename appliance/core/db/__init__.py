"""Database: ORM models, sessions and schema migrations."""
