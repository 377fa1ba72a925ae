"""Matplotlib backend for sandboxes (MPLBACKEND=module://codemode.mpl_backend, set by the kernel).

Agg (no window, nothing blocks) whose plt.show() displays the open figures as PNG images and
closes them (codemode.display). Figures a program leaves open are displayed when it exits; a
session's kernel displays them at the end of each call.
"""
import atexit

from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


def show(*args, **kwargs):
    from codemode.display import show_figures

    show_figures()


def _at_exit():
    try:
        show()
    except Exception:  # the interpreter is ending: nothing to report to
        pass


atexit.register(_at_exit)
