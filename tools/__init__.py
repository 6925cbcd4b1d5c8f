"""Build-time tools of the project (not part of the installed package)."""
