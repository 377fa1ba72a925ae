"""Rich outputs (runtime/PROTOCOL.md, "Display"): what a call's code put in the display directory
(codemode.display in runtime/sdk, the Matplotlib backend, or any process writing a file there)
becomes `display` frames, sent before the call's result.

Everything in the directory was written by user code: sizes are checked with lstat() before
anything is read, at most the cap is read, only regular files count, an image must start with the
signature of its type (closed set: PNG, JPEG), and whatever is over a cap becomes a note that says
so. The directory is emptied before and after every call.
"""
import base64
import os
import stat

DEFAULT_LIMITS = {"displayMaxImageBytes": 2 * 1024 * 1024, "displayMaxBytes": 5 * 1024 * 1024, "displayMaxItems": 10}
IMAGES = {".png": ("image/png", b"\x89PNG\r\n\x1a\n"), ".jpg": ("image/jpeg", b"\xff\xd8\xff")}
TEXTS = {".html": "html", ".table": "table", ".txt": "text"}
FIGURES_DIR = "/workspace/figures"


def limits_of(msg):
    """The request's caps; a missing or malformed one takes its default."""
    out = {}
    for key, default in DEFAULT_LIMITS.items():
        v = msg.get(key, default)
        out[key] = v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else default
    return out


def clear(directory):
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass  # a directory made by user code stays; it is never read


def _note(text):
    return {"kind": "text", "format": "note", "text": text}


def _read(path, size_cap):
    """At most size_cap + 1 bytes of a regular file, not following links; None if not one."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], size_cap + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


# The largest figure number: the gateway takes a path of 1 to 9 digits only.
MAX_FIGURE = 999_999_999


class Figures:
    """Saves a session's images in /workspace/figures/<n>.<ext>, numbered on from what is there."""

    def __init__(self, directory=None):
        # CODEMODE_FIGURES_DIR: only for the kernel's tests, which run outside a pod.
        self._dir = directory or os.environ.get("CODEMODE_FIGURES_DIR") or FIGURES_DIR
        self._next = None

    def save(self, data, ext):
        try:
            os.makedirs(self._dir, exist_ok=True)
            if self._next is None:
                # 1 to 9 ASCII digits only: "²".isdigit() too, and int() of it raised; and the
                # gateway takes a path of at most 9 digits (src/exec/display.ts), so numbering on
                # from a longer name (a timestamp in ms) would lose every image after it.
                nums = [int(s) for s in (n.split(".")[0] for n in os.listdir(self._dir)) if 0 < len(s) <= 9 and s.isascii() and s.isdigit()]
                self._next = max(nums, default=0) + 1
            if self._next > MAX_FIGURE:
                return None  # past the last number the gateway takes: the image goes back unsaved
            path = os.path.join(self._dir, "%d%s" % (self._next, ext))
            self._next += 1
            with open(path, "wb") as f:
                f.write(data)
            return path
        except OSError:
            return None  # e.g. the workspace is full: the image still goes back, unsaved


def collect(directory, limits, cap_chars, figures=None):
    """The display items of the call that just ended, as frame bodies; empties the directory."""
    try:
        names = sorted(n for n in os.listdir(directory) if not n.startswith("."))
    except OSError:
        return []
    items, total, chars, dropped = [], 0, 0, 0
    max_items, max_image, max_total = limits["displayMaxItems"], limits["displayMaxImageBytes"], limits["displayMaxBytes"]
    try:
        for name in names:
            if len(items) >= max_items:
                dropped += 1
                continue
            items.append(_item(os.path.join(directory, name), os.path.splitext(name)[1].lower(), max_image, max_total - total, cap_chars, cap_chars - chars, figures))
            if items[-1]["kind"] == "image":
                total += items[-1].pop("size")
            elif items[-1]["format"] != "note":
                chars += len(items[-1]["text"])
    finally:
        clear(directory)
    if dropped:
        items.append(_note("%d more display item(s) were not returned: at most %d per call" % (dropped, max_items)))
    return items


def _item(path, ext, max_image, room, cap_chars, chars_left, figures):
    """One item; its texts share the call's cap_chars with the texts before it (chars_left)."""
    try:
        size = os.lstat(path).st_size
        if ext in IMAGES:
            mime, signature = IMAGES[ext]
            if size > max_image:
                return _note("an image of %d bytes was not returned: over the cap of %d bytes per image" % (size, max_image))
            if size > room:
                return _note("an image of %d bytes was not returned: over the cap of bytes of images per call" % size)
            data = _read(path, max_image)
            if data is None or len(data) > max_image or len(data) > room:
                return _note("an image was not returned: not a regular file of at most %d bytes" % max_image)
            if not data.startswith(signature):
                return _note("an image was not returned: the file is not a %s" % mime.split("/")[1].upper())
            item = {"kind": "image", "mime": mime, "data": base64.b64encode(data).decode("ascii"), "size": len(data)}
            saved = figures.save(data, ext) if figures is not None else None
            if saved:
                item["path"] = saved
            return item
        if ext in TEXTS:
            if chars_left <= 0:
                return _note("a display text was not returned: the texts one call displays share the cap of %d characters" % cap_chars)
            data = _read(path, 4 * chars_left + 4)
            if data is None:
                return _note("a display item was not returned: not a regular file")
            text = data.decode("utf-8", "replace")
            return {"kind": "text", "format": TEXTS[ext], "text": text[:chars_left]}
        return _note("a display item was not returned: unknown type %s" % repr(ext)[:40])
    except OSError as err:
        return _note("a display item could not be read: %s" % (err.strerror or "error"))
