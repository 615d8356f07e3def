"""Revision files, one change per file, named ``YYYY-MM-DD-HHMM_slug.py``."""
