"""`python3 -m codemode ...`: the codemode module for bash and other shells; prints JSON."""
import json
import sys

from codemode import ToolError, call_tool, describe, search, servers


def _cli(argv):
    if not argv or argv[0] not in ("servers", "search", "describe", "call"):
        sys.stderr.write("usage: python3 -m codemode servers | search QUERY [LIMIT] | describe SERVER [TOOL] | call SERVER TOOL [JSON | key=value ...]\n")
        return 2
    cmd, rest = argv[0], argv[1:]
    try:
        if cmd == "servers":
            out = servers()
        elif cmd == "search":
            out = search(" ".join(rest[:1]), int(rest[1]) if len(rest) > 1 else 10)
        elif cmd == "describe":
            out = describe(rest[0], rest[1] if len(rest) > 1 else None)
        else:
            server, tool, pairs = rest[0], rest[1], rest[2:]
            if len(pairs) == 1 and pairs[0].lstrip().startswith("{"):
                args = json.loads(pairs[0])
            else:
                args = {}
                for p in pairs:
                    k, _, v = p.partition("=")
                    try:
                        args[k] = json.loads(v)
                    except ValueError:
                        args[k] = v
            out = call_tool(server, tool, args)
    except ToolError as err:
        sys.stderr.write("ToolError (%s): %s\n" % (err.kind, err))
        return 1
    except (IndexError, ValueError) as err:
        sys.stderr.write("codemode: bad arguments: %s\n" % err)
        return 2
    sys.stdout.write((out if isinstance(out, str) else json.dumps(out, ensure_ascii=False, indent=1)) + "\n")
    return 0


sys.exit(_cli(sys.argv[1:]))
