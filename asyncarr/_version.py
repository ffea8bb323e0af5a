"""The version of asyncarr, in one place (the package root, the facade and the S3 User-Agent read it)."""

__version__ = "0.1.0"
