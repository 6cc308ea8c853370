"""`python -m lancens_cli`."""

from lancens_cli.cli.app import main

main()
