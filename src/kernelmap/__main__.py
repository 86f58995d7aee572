"""`python -m kernelmap` runs the CLI."""

import sys

from kernelmap.cli import main

sys.exit(main())
