"""collections a user may retrieve from

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user_collections",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("collection", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id", "collection"),
    )
    with op.batch_alter_table("documents") as batch_op:
        batch_op.create_index("ix_documents_collection", ["collection"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("documents") as batch_op:
        batch_op.drop_index("ix_documents_collection")
    op.drop_table("user_collections")
