"""graphshard's command line as one rank of a job (run by torchrun in the start-up tests): the rank named by
``GS_FAIL_RANK`` is given a partition config that does not exist, the others the real one."""

import os
import sys

from graphshard.cli import main

args = sys.argv[1:]
if os.environ.get("RANK") == os.environ.get("GS_FAIL_RANK"):
    args = [a + ".missing" if a.endswith(".json") else a for a in args]
sys.exit(main(args))
