"""grounded answers: each answer's evidence card, its sentence verdicts and the answer mode

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("evidence", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("verdicts", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("answer_mode", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("claims_total", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("claims_supported", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        for name in ("claims_supported", "claims_total", "answer_mode", "verdicts", "evidence"):
            batch.drop_column(name)
