"""prompt parts: how each question's turn was laid out (``rag.layout.SentTurn``: the layout,
the hint and question, a re-lay's document block, the chunks rendered), so that later turns,
continuations and regenerations rebuild the prompt exactly as it was sent

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("prompt_parts", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("prompt_parts")
