"""Reads a callgrind dump made with --dump-instr=yes, for the benchmark scripts (Scripts/bench-dot-cost,
Scripts/callgrind-split): names and objects decompressed, positions made absolute, "'2"-style recursion marks
removed, and the self cost of every executed instruction handed to a callback."""
import re


def read(path, each, called=None) -> tuple[list, list]:
    """Calls each(object, function, address, costs) for every self-cost line of the dump (costs in the order of
    its `events:` line; trailing zeros may be left out), and called(function, count) for every `calls=` line when
    given. Returns the event names and the first `summary:` or `totals:` line's costs."""
    names, objects = {}, {}

    def resolve(table, token):
        m = re.match(r"\((\d+)\)(?: (.*))?", token)
        if not m:
            return token
        if m.group(2):
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), token)

    events, summary = ["Ir"], None
    obj = fn_obj = fn = callee = None
    position, after_calls = 0, False
    with open(path, errors="replace") as dump:
        for line in dump:
            line = line.rstrip("\n")
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith(("summary:", "totals:")):
                summary = summary or [int(v) for v in line.split()[1:]]
            elif line.startswith("ob="):
                obj = resolve(objects, line[3:])
            elif line.startswith("cob="):
                resolve(objects, line[4:])
            elif line.startswith("fn="):
                fn, fn_obj = re.sub(r"'\d+$", "", resolve(names, line[3:])), obj
            elif line.startswith("cfn="):
                callee = re.sub(r"'\d+$", "", resolve(names, line[4:]))
            elif line.startswith("calls="):
                after_calls = True  # the next cost line is the call's inclusive cost
                if called:
                    called(callee, int(line[6:].split()[0]))
            elif line and line[0] in "0123456789+-*" and fn is not None:
                fields = line.split()  # positions: instruction, line; then the costs
                token = fields[0]
                if token.startswith("0x"):
                    position = int(token, 16)
                elif token[0] in "+-":
                    position += int(token[0] + "1") * int(token[1:], 0)
                elif token != "*":
                    position = int(token)
                if len(fields) > 2 and not after_calls:
                    each(fn_obj, fn, position, [int(v) for v in fields[2:]])
                after_calls = False
    return events, summary
