"""``python -m roofline``: see roofline/cli.py."""

import sys

from roofline.cli import main

if __name__ == "__main__":
    sys.exit(main())
