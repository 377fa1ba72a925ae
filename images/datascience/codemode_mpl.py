"""Matplotlib on a read-only root file system (imported at start-up by codemode_mpl.pth).

Matplotlib wants a writable config/cache directory and builds its font list there on first use
(~1-3 s). The image sets MPLCONFIGDIR=/tmp/matplotlib (the pod's writable /tmp) and ships the font
list built at image build time in /usr/local/share/codemode/matplotlib; this copies it into place
once per pod, so the first plot does not pay for building it. Costs one stat() per interpreter
start when the copy is already there; never raises.
"""
import os

PREBUILT = "/usr/local/share/codemode/matplotlib"


def _prepare():
    target = os.environ.setdefault("MPLCONFIGDIR", "/tmp/matplotlib")
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        names = [n for n in os.listdir(PREBUILT) if n.startswith("fontlist-")]
    except OSError:
        return
    if not names or os.path.exists(os.path.join(target, names[0])):
        return
    try:
        os.makedirs(target, mode=0o700, exist_ok=True)
        for name in names:
            with open(os.path.join(PREBUILT, name), "rb") as src:
                data = src.read()
            tmp = os.path.join(target, ".%s.%d" % (name, os.getpid()))
            with open(tmp, "wb") as dst:
                dst.write(data)
            os.replace(tmp, os.path.join(target, name))  # atomic: a parallel start sees all or nothing
    except OSError:
        pass


_prepare()
