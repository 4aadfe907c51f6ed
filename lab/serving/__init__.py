"""Checks of a cselab model served by other projects' servers."""
