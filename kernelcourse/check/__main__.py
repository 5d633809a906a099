"""`python -m kernelcourse.check`: make check's command line (cli.py), and the check's child."""
from .cli import main

raise SystemExit(main())
