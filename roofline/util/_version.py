"""The package's version (``roofline.__version__``), written into every report and cache it makes."""

VERSION = "0.1.0"
