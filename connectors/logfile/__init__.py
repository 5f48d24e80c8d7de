"""Tailing log files (JSON lines or named-group regexes) across rotation and truncation."""
