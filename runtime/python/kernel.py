#!/usr/bin/env python3
"""codemode session kernel: a long-lived interpreter behind a UNIX socket (runtime/README.md).

    python3 kernel.py --socket /tmp/.codemode/kernel.sock --language python|bash

Python 3.8+ standard library only. The code lives in the codemode_kernel package next to this file.
"""
import sys

# The runtime mount is read-only: no __pycache__ for the kernel's modules (main() turns this
# back on once they are all imported, for the user's own modules).
sys.dont_write_bytecode = True

from codemode_kernel.server import main  # noqa: E402
from codemode_kernel.tools import SDK_DIR, add_packages_dir, prepare_environment  # noqa: E402

# The `codemode` module (tool calls, runtime/sdk) for session code, bash commands and run programs.
prepare_environment(sys.argv[1:])

# User code imports from the working directory (like `python3 -c`), not from the runtime mount.
sys.path[0] = ""
sys.path.append(SDK_DIR + "/python")
add_packages_dir(sys.path)
main(sys.argv[1:])
