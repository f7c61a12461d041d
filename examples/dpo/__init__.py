"""DPO example trainer."""
