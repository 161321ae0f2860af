"""chunk OCR confidence: the mean word confidence (0..1) of a chunk whose text was read by OCR
from an image-only PDF page or an image file; null for text read from a text layer

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        batch.add_column(sa.Column("ocr_confidence", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        batch.drop_column("ocr_confidence")
