"""Reads a callgrind dump made with --dump-instr=yes, for the benchmark scripts (Scripts/bench-dot-cost,
Scripts/callgrind-split): names and objects decompressed, positions made absolute, "'2"-style recursion marks
removed, and the self cost of every executed instruction handed to a callback."""
import re


def read(path, each) -> tuple[list, list]:
    """Calls each(object, function, address, costs) for every self-cost line of the dump (costs in the order of
    its `events:` line; trailing zeros may be left out). Returns the event names and the first `summary:` or
    `totals:` line's costs."""
    names, objects = {}, {}

    def resolve(table, token):
        m = re.match(r"\((\d+)\)(?: (.*))?", token)
        if not m:
            return token
        if m.group(2):
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), token)

    events, summary = ["Ir"], None
    obj = fn_obj = fn = None
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
                resolve(names, line[4:])
            elif line.startswith("calls="):
                after_calls = True  # the next cost line is the call's inclusive cost
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


def calls(path) -> dict:
    """How often each function (linker names, "'2"-style recursion marks removed) was called in a dump: the sum
    of the `calls=` lines that name it."""
    names, counts, callee = {}, {}, None
    with open(path, errors="replace") as dump:
        for line in dump:
            if line.startswith(("fn=", "cfn=")):
                m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
                name = (names.setdefault(m.group(1), m.group(2)) if m.group(2) else names.get(m.group(1))) \
                    if m else line.rstrip("\n").split("=", 1)[1]
                if line.startswith("cfn="):
                    callee = re.sub(r"'\d+$", "", name or "")
            elif line.startswith("calls=") and callee:
                counts[callee] = counts.get(callee, 0) + int(line[6:].split()[0])
    return counts
