"""Operations around the campaign: provider adapters, import/export, demo data."""
