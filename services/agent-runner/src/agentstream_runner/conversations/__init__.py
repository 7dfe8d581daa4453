"""The conversations this runner owns: one owner per conversation (`owner.py`), and the
owners by conversation key (`registry.py`)."""
