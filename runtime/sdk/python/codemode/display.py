"""display(): rich outputs from sandbox code — images, HTML and tables — returned to the caller
after the call's text (execute_code's result gets MCP `image` content for images). Standard
library only; Matplotlib and pandas are used when the code already imported them.

    from codemode import display
    display(fig)                          # a Matplotlib figure -> PNG
    display(png_bytes)                    # bytes of a PNG or JPEG (sniffed), or mime="image/png"
    display("<b>hi</b>", mime="text/html")
    display(df)                           # a pandas DataFrame/Series -> a compact text table

Items go as files into $CODEMODE_DISPLAY_DIR (set by the kernel; one directory per kernel, emptied
before each call): the kernel collects them when the call ends, checks and caps them (count, bytes
per image and per call; a PNG must start with the PNG signature), and sends them to the gateway.
A figure left open when a session call or a program ends, or shown with plt.show(), is displayed
the same way (the kernel selects the backend codemode.mpl_backend, Agg plus this).
"""
import io
import itertools
import os
import sys
import time

__all__ = ["display", "show_figures", "table_text"]

_EXT = {"image/png": ".png", "image/jpeg": ".jpg", "text/html": ".html", "text/plain": ".txt", "table": ".table"}
_seq = itertools.count(1)
TABLE_MAX_ROWS = 30
TABLE_MAX_COLS = 12


def _write(ext, data):
    directory = os.environ.get("CODEMODE_DISPLAY_DIR")
    if not directory:
        raise RuntimeError("display() works inside a codemode sandbox only (CODEMODE_DISPLAY_DIR is not set)")
    if isinstance(data, str):
        data = data.encode("utf-8", "replace")
    name = "%020d-%d-%d%s" % (time.time_ns(), os.getpid(), next(_seq), ext)
    tmp = os.path.join(directory, "." + name)  # dot files are not collected: the rename is atomic
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(directory, name))


def table_text(obj):
    """A pandas DataFrame or Series as a compact text table (bounded rows and columns), else None."""
    mod = type(obj).__module__ or ""
    if not mod.startswith("pandas") or not hasattr(obj, "to_string"):
        return None
    kwargs = dict(max_rows=TABLE_MAX_ROWS, show_dimensions=len(obj) > TABLE_MAX_ROWS)
    if getattr(obj, "ndim", 1) == 2:
        kwargs.update(max_cols=TABLE_MAX_COLS, line_width=None)
        kwargs["show_dimensions"] = len(obj) > TABLE_MAX_ROWS or obj.shape[1] > TABLE_MAX_COLS
    try:
        return obj.to_string(**kwargs)
    except TypeError:  # an old pandas without one of the keywords
        return obj.to_string()


def _is_figure(obj):
    return hasattr(obj, "savefig") and hasattr(obj, "canvas")


def _sniff(data):
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    return None


def display(*objs, mime=None):
    """Returns each object to the caller as an image, HTML or a table (see the module's doc)."""
    for obj in objs:
        _display_one(obj, mime)


def _display_one(obj, mime):
    if mime is not None:
        if mime not in _EXT:
            raise ValueError("mime must be one of %s" % ", ".join(sorted(_EXT)))
        _write(_EXT[mime], obj if isinstance(obj, (bytes, bytearray, str)) else str(obj))
        return
    if isinstance(obj, (bytes, bytearray)):
        kind = _sniff(bytes(obj[:8]))
        if kind is None:
            raise ValueError("display(bytes) needs a PNG or JPEG (or pass mime=...)")
        _write(_EXT[kind], bytes(obj))
        return
    if _is_figure(obj):
        buf = io.BytesIO()
        obj.savefig(buf, format="png")
        _write(".png", buf.getvalue())
        return
    table = table_text(obj)
    if table is not None:
        _write(".table", table)
        return
    png = getattr(obj, "_repr_png_", None)
    if callable(png):
        data = png()
        if isinstance(data, (bytes, bytearray)) and _sniff(bytes(data[:8])) == "image/png":
            _write(".png", bytes(data))
            return
    html = getattr(obj, "_repr_html_", None)
    if callable(html) and not isinstance(obj, type):
        text = html()
        if isinstance(text, str):
            _write(".html", text)
            return
    _write(".txt", obj if isinstance(obj, str) else repr(obj))


def show_figures():
    """Displays every open Matplotlib figure and closes it (what plt.show() does here)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in plt.get_fignums():
        fig = plt.figure(num)
        try:
            display(fig)
        finally:
            plt.close(fig)
