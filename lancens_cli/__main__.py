"""`python -m lancens_cli`."""

import os
import signal

# a Ctrl-C while Python still imports our modules: nothing has started, so leave with 130 at once
signal.signal(signal.SIGINT, lambda _signum, _frame: os._exit(130))

from lancens_cli import interrupt  # noqa: E402

interrupt.install_for_process()  # before the imports: a Ctrl-C during start-up exits 130 too

from lancens_cli.cli.app import main  # noqa: E402

main()
