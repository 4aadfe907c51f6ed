"""Checks of cselab's own re-implementations against the engines they stand in for."""
