"""GRPO example trainer."""
