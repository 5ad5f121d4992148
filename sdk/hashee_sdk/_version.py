"""The package's version: read by setuptools at build time (sdk/pyproject.toml) and by
``hashee_sdk.__version__``, so the two never disagree. Bump with CHANGELOG.md."""

__version__ = "0.2.0"
