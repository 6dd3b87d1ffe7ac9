"""Device backends of mnnpy, one sub-package per device kind (``cpu``; GPU ones later)."""
