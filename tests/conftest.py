"""Shared test fixtures. The real sample traces live in ../shared/data (read-only), beside the repo."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MSP_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to the real sample traces (../shared/data); tests needing them skip if it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"sample data not found at {SHARED_DATA} (set MSP_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT
