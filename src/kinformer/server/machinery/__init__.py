"""Shared API machinery of the server: Status errors and causes, quantities, JSON copies and limits."""
