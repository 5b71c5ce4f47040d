"""Entry point of a measurement worker process: ``python -m autosched.measure._child FD NAME``."""

import sys

from autosched.measure.process import child_main

if __name__ == "__main__":
    child_main(int(sys.argv[1]))
