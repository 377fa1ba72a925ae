"""The Python side of the codemode session kernel (see runtime/README.md and runtime/PROTOCOL.md).

A package with a distinctive name, so a user's own `framing.py` or `output.py` in the working
directory never collides with the kernel's modules.
"""
