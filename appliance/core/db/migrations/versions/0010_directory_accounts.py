"""directory accounts: where a user's account lives (``local``, ``ldap`` or ``oidc``), the
directory's own id for it (the LDAP DN; the OIDC issuer and subject) and when the directory
last confirmed it (its API keys and sessions ask again after ``directory.check_interval_s``)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(
            sa.Column("source", sa.String(16), nullable=False, server_default="local")
        )
        batch.add_column(sa.Column("external_id", sa.String(512), nullable=True))
        batch.add_column(sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("confirmed_at")
        batch.drop_column("external_id")
        batch.drop_column("source")
