"""Level 2a: claims checked against structured records and their typed values."""
