"""Alembic environment: runs migrations on the engine handed in by ``appliance.core.db.session``."""

from alembic import context

from appliance.core.db.models import Base

target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine = context.config.attributes["engine"]
    with engine.begin() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        context.run_migrations()


run_migrations_online()
