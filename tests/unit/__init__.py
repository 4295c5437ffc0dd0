"""A package only so that the test packages below it are imported as ``unit.<name>``: as
top-level ``producer`` or ``consumer`` they would clash with the source folders of those names
whenever the repository root is on ``sys.path`` (``python -m pytest``)."""
