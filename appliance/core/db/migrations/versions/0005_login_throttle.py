"""login throttle: failed password checks per (username, client address) and per address

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "login_counters",
        sa.Column("scope", sa.String(length=8), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("scope", "address", "username"),
    )
    op.create_index("ix_login_counters_last_at", "login_counters", ["last_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_login_counters_last_at", table_name="login_counters")
    op.drop_table("login_counters")
