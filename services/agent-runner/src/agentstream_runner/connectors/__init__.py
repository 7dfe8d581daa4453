"""Model connectors: a typed chunk stream per request (`base.py`), and how a run picks one (`resolve.py`)."""
