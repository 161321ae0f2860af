"""per-turn layout: the prompt layout an answer was sent with, and the cached tokens the cache
shadow predicted for it (beside the engine's reported ``cached_tokens``)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("layout", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("predicted_cached", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("predicted_cached")
        batch.drop_column("layout")
