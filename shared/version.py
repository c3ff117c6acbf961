"""The package version, in one place (no imports: every layer may read it)."""

__version__ = "0.1.0"
