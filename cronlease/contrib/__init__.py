"""Integrations with frameworks that have an application model of their own (Django)."""
