"""fsd's Python executor: one process per code context, for the context's whole life.

Requests come as JSON lines on fd 3 and frames go out as JSON lines on fd 4, so nothing user
code writes to stdout or stderr (even after its call returned, even with os.write) can
corrupt the protocol; fd 1 and 2 are the call's output, which fsd streams as it arrives.
Before each call's `done` frame the executor writes the call's sentinel to fd 1 and fd 2,
so fsd knows it has read all of the call's output; before each result it writes a mark
(the sentinel with `-r<n>` before its last byte) to fd 1, so fsd sends the result after
what was printed before it.

Rich results use IPython's display formatter when IPython is installed (every `_repr_*_`
method and registered formatter), the objects' `_repr_*_` methods otherwise; open
matplotlib figures are sent as PNG after each call (the Agg backend; `plt.show()` is
quiet). A SyntaxError is an error like any other. SIGINT interrupts the running call
(KeyboardInterrupt) and leaves the context usable.
"""

import ast
import asyncio
import base64
import builtins
import inspect
import io
import json
import linecache
import os
import sys
import traceback
import warnings

REQUESTS = os.fdopen(3, "rb", buffering=0)
FRAMES = 4
for fd in (3, 4):
    os.set_inheritable(fd, False)

warnings.filterwarnings("ignore", message=".*non-interactive.*")
warnings.filterwarnings("ignore", message=".*cannot be shown.*")

try:
    from IPython.core.formatters import DisplayFormatter

    FORMATTER = DisplayFormatter()
except Exception:  # IPython missing or broken: the standard library alone
    FORMATTER = None

# MIME type → the result event's format field, in the order results are sent.
FORMATS = [
    ("image/png", "png"),
    ("image/jpeg", "jpeg"),
    ("image/svg+xml", "svg"),
    ("text/html", "html"),
    ("application/json", "json"),
    ("text/latex", "latex"),
    ("text/markdown", "markdown"),
    ("application/javascript", "javascript"),
    ("text/plain", "text"),
]
REPR_METHODS = {
    "image/png": "_repr_png_",
    "image/jpeg": "_repr_jpeg_",
    "image/svg+xml": "_repr_svg_",
    "text/html": "_repr_html_",
    "application/json": "_repr_json_",
    "text/latex": "_repr_latex_",
    "text/markdown": "_repr_markdown_",
    "application/javascript": "_repr_javascript_",
}

CALL = {"id": 0, "sentinel": b"", "results": 0}
NAMESPACE = {"__name__": "__main__", "__builtins__": builtins}
LOOP = asyncio.new_event_loop()


def send(frame):
    data = (json.dumps(frame, default=str) + "\n").encode()
    view = memoryview(data)
    while view:
        written = os.write(FRAMES, view)
        view = view[written:]


def mime_bundle(value):
    if FORMATTER is not None:
        try:
            data, _ = FORMATTER.format(value)
            return data
        except Exception:
            pass
    data = {}
    for mime, method in REPR_METHODS.items():
        represent = getattr(value, method, None)
        if callable(represent) and not isinstance(value, type):
            try:
                shown = represent()
            except Exception:
                continue
            if isinstance(shown, tuple):
                shown = shown[0]
            if shown is not None:
                data[mime] = shown
    data["text/plain"] = repr(value)
    return data


def send_result(fmt, data):
    if isinstance(data, (bytes, bytearray)):
        data = base64.b64encode(data).decode()
    # The mark goes to fd 1 after what was printed, so the daemon puts the result there.
    CALL["results"] += 1
    for stream in (sys.stdout, sys.__stdout__):
        try:
            stream.flush()
        except Exception:
            pass
    try:
        os.write(1, CALL["sentinel"][:-1] + b"-r%d\x01" % CALL["results"])
    except OSError:
        pass
    send({"type": "result", "id": CALL["id"], "format": fmt, "data": data})


def display(*values, **_):
    """Sends each value as rich results, as IPython's display() would."""
    for value in values:
        show(value)


def show(value):
    if isinstance(value, (dict, list)):
        try:
            json.dumps(value)
            send_result("json", value)
            return
        except (TypeError, ValueError):
            pass
    data = mime_bundle(value)
    rich = [fmt for mime, fmt in FORMATS if mime in data and fmt != "text"]
    for mime, fmt in FORMATS:
        if mime not in data:
            continue
        if fmt == "text" and rich and rich != ["html"] and "html" not in rich:
            continue
        send_result(fmt, data[mime])


def send_figures():
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    try:
        for number in pyplot.get_fignums():
            buffer = io.BytesIO()
            pyplot.figure(number).savefig(buffer, format="png", bbox_inches="tight")
            send_result("png", buffer.getvalue())
        pyplot.close("all")
    except Exception as error:  # a figure that cannot be drawn is the user's error
        send_error(error)


def send_error(error):
    tb = error.__traceback__
    # Drop the executor's own frames: the traceback starts in the user's cell.
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
        tb = tb.tb_next
    lines = traceback.format_exception(type(error), error, tb)
    send(
        {
            "type": "error",
            "id": CALL["id"],
            "ename": type(error).__name__,
            "evalue": str(error),
            "traceback": "".join(lines).rstrip("\n").split("\n"),
        }
    )


def run(code):
    name = "<cell-%d>" % CALL["id"]
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    tree = ast.parse(code, name, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    evaluate(compile(tree, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT))
    if last is not None:
        value = evaluate(compile(last, name, "eval", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT))
        if value is not None:
            NAMESPACE["_"] = value
            show(value)


def evaluate(compiled):
    """Runs compiled code in the context's namespace; top-level await runs on its loop."""
    value = eval(compiled, NAMESPACE)
    if inspect.iscoroutine(value):
        value = LOOP.run_until_complete(value)
    return value


def reenter():
    """Back into this context's directory by name when the name has come to lead elsewhere
    (a restore mounted on it or above it, its release, a directory put in its place): code
    run in the directory the mount hides would read the files the restore replaced and
    write where nothing shows them. Under --confine, not out of the roots."""
    name = WHERE[0]
    if name is None:
        return
    try:
        if os.path.samestat(os.stat(name), os.stat(".")):
            return
        here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.chdir(name)
            if ROOTS and not beneath(os.getcwd(), ROOTS):
                os.fchdir(here)
        finally:
            os.close(here)
    except OSError:
        pass  # a name that leads nowhere: the context stays where it is


def remember():
    """Notes the context's directory by name: after a cell, as code may have moved it. A
    directory a release took away (a lazy unmount) has no name to note."""
    try:
        here = os.getcwd()
    except OSError:
        return
    if here.startswith("/"):
        WHERE[0] = here


def call(request):
    reenter()
    CALL["id"] = request["id"]
    CALL["sentinel"] = request.get("sentinel", "").encode()
    CALL["results"] = 0
    ok = True
    try:
        run(request["code"])
    except BaseException as error:  # KeyboardInterrupt and SystemExit too: the context lives on
        ok = False
        send_error(error)
    send_figures()
    remember()
    finish(request, ok)


def finish(request, ok, outside=False):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    sentinel = request.get("sentinel", "").encode()
    for fd in (1, 2):
        try:
            os.write(fd, sentinel)
        except OSError:
            pass
    done = {"type": "done", "id": request["id"], "ok": ok}
    if outside:
        done["outside"] = True
    send(done)


# The --confine roots the context's directory must lie beneath (from its init), and the
# directory's name as last noted (`remember`).
ROOTS = []
WHERE = [None]


def beneath(here, roots):
    return any(here == root or here.startswith(root.rstrip("/") + "/") for root in roots)


def init(request):
    ROOTS[:] = request.get("within") or []
    if request.get("cwd"):
        before = os.getcwd()
        try:
            os.chdir(request["cwd"])
            # Confined: where the kernel says this process now is (getcwd), not the path it
            # was given, must lie beneath a root; a link swapped in on the way is caught.
            roots = request.get("within") or []
            if roots and not beneath(os.getcwd(), roots):
                os.chdir(before)
                finish(request, False, outside=True)
                return
        except OSError:
            finish(request, False)
            return
    os.environ.update(request.get("env") or {})
    remember()
    finish(request, True)


def main():
    NAMESPACE["display"] = display
    try:
        import IPython.display

        IPython.display.display = display
        import IPython.core.display_functions

        IPython.core.display_functions.display = display
    except Exception:
        pass
    send({"type": "ready", "python": sys.version.split()[0], "ipython": FORMATTER is not None})
    buffer = b""
    while True:
        try:
            chunk = REQUESTS.read(65536)
        except KeyboardInterrupt:
            continue  # an interrupt that came after its call ended
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if not line.strip():
                continue
            request = json.loads(line)
            try:
                if request.get("op") == "init":
                    init(request)
                else:
                    call(request)
            except KeyboardInterrupt:
                finish(request, False)


if __name__ == "__main__":
    main()
