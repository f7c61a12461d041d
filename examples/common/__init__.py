"""Shared pieces of the example trainers (model building, Ray setup)."""
