"""`python -m lancens_cli`."""

from lancens_cli import interrupt

interrupt.install_for_process()  # before the imports: a Ctrl-C during start-up exits 130 too

from lancens_cli.cli.app import main  # noqa: E402

main()
