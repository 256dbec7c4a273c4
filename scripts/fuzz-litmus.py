#!/usr/bin/env python3
"""Soundness fuzzing of the simulator against the axiomatic PTX model.

Writes random PTX litmus tests (the classic shapes, mutations and mixes of them, load buffering
on one location, random programs; every load, store, RMW and fence flavour, scope and CTA or
GPU placement), asks `gpuwmm litmus model` for every final state PTX allows, runs each test on
the simulator, and reports a test UNSOUND when the simulator reached a state the model does not
allow. Tests with an allowed state the simulator never reached are counted (the simulator may
miss behaviours, see crates/gpuwmm-sim/README.md), not failed.

    scripts/fuzz-litmus.py OUTDIR [--tests N] [--seed S] [--executions E] [--shapes SET]

The tests are a function of --seed, and each simulator run uses the same seed, so a finding
replays. A second call with the same OUTDIR and options resumes: tests with both outputs are
not run again. Exit status 1 when a test is UNSOUND, 2 for bad arguments or a failed command.
"""
import argparse
import hashlib
import os
import random
import re
import subprocess
import sys

SCOPES = ["cta", "gpu", "sys"]
LOADS = ["ld.weak", "ld.relaxed.cta", "ld.relaxed.gpu", "ld.relaxed.sys",
         "ld.acquire.cta", "ld.acquire.gpu", "ld.acquire.sys", "ld.volatile"]
STORES = ["st.weak", "st.relaxed.cta", "st.relaxed.gpu", "st.relaxed.sys",
          "st.release.cta", "st.release.gpu", "st.release.sys", "st.volatile"]
FENCES = ["fence.acq_rel.cta", "fence.acq_rel.gpu", "fence.acq_rel.sys", "fence.sc.cta",
          "fence.sc.gpu", "fence.sc.sys", "membar.cta", "membar.gl", "membar.sys"]
RMW_SEMANTICS = ["relaxed", "acquire", "release", "acq_rel"]
RED_SEMANTICS = ["relaxed", "release"]

# A shape is one list of accesses per thread: (kind, location), kind R (read), W (write) or
# U (read-modify-write).
CLASSIC = {
    "MP": [[("W", "x"), ("W", "y")], [("R", "y"), ("R", "x")]],
    "WRC": [[("W", "x")], [("R", "x"), ("W", "y")], [("R", "y"), ("R", "x")]],
    "ISA2": [[("W", "x"), ("W", "y")], [("R", "y"), ("W", "z")], [("R", "z"), ("R", "x")]],
    "RWC": [[("W", "x")], [("R", "x"), ("R", "y")], [("W", "y"), ("R", "x")]],
    "IRIW": [[("W", "x")], [("R", "x"), ("R", "y")], [("W", "y")], [("R", "y"), ("R", "x")]],
    "SB": [[("W", "x"), ("R", "y")], [("W", "y"), ("R", "x")]],
    "LB": [[("R", "x"), ("W", "y")], [("R", "y"), ("W", "x")]],
    "R": [[("W", "x"), ("W", "y")], [("W", "y"), ("R", "x")]],
    "S": [[("W", "x"), ("W", "y")], [("R", "y"), ("W", "x")]],
    "2+2W": [[("W", "x"), ("W", "y")], [("W", "y"), ("W", "x")]],
    "CoRR": [[("W", "x")], [("R", "x"), ("R", "x")]],
    "CoWR": [[("W", "x"), ("R", "x")], [("W", "x")]],
    "CoWW": [[("W", "x"), ("W", "x")], [("R", "x"), ("R", "x")]],
    "3.LB": [[("R", "x"), ("W", "y")], [("R", "y"), ("W", "z")], [("R", "z"), ("W", "x")]],
    "Z6": [[("W", "x"), ("W", "y")], [("W", "y"), ("W", "z")], [("R", "z"), ("R", "x")]],
    "WWC": [[("W", "x")], [("R", "x"), ("W", "y")], [("R", "y"), ("W", "x")]],
    "SB+RMW": [[("U", "x"), ("R", "y")], [("U", "y"), ("R", "x")]],
    "LostUpd": [[("U", "x"), ("R", "y")], [("U", "x"), ("W", "y")]],
}
ONE_LOCATION = {
    "LB1": [[("R", "x"), ("W", "x")], [("R", "x"), ("W", "x")]],
    "LB1U": [[("R", "x"), ("U", "x")], [("R", "x"), ("U", "x")]],
    "LB1+y": [[("R", "x"), ("W", "x"), ("W", "y")], [("R", "y"), ("W", "x")]],
    "LB1x3": [[("R", "x"), ("W", "x")], [("R", "x"), ("W", "x")], [("R", "x"), ("R", "x")]],
    "CoRW1": [[("R", "x"), ("W", "x")], [("R", "x"), ("R", "x")]],
    "CoRW2": [[("R", "x"), ("W", "x")], [("W", "x")]],
    "RRW": [[("R", "x"), ("R", "x"), ("W", "x")], [("U", "x")]],
    "RWRW": [[("R", "x"), ("W", "x"), ("R", "x"), ("W", "x")], [("W", "x"), ("R", "x")]],
}
SHAPE_SETS = {"classic": CLASSIC, "one-location": ONE_LOCATION,
              "all": {**CLASSIC, **ONE_LOCATION}}


class Thread:
    """One thread's instructions and how many registers they use."""

    def __init__(self):
        self.registers = 0
        self.instructions = []

    def register(self):
        self.registers += 1
        return f"r{self.registers - 1}"


def random_shape(rng):
    threads = [[] for _ in range(rng.randint(2, 4))]
    locations = ["x", "y", "z"][:rng.randint(2, 3)]
    for k in range(rng.randint(len(threads) + 2, 10)):
        t = threads[k if k < len(threads) else rng.randrange(len(threads))]
        if len(t) < 4:
            t.append((rng.choice("RRWWU"), rng.choice(locations)))
    return threads


def mutate(rng, threads):
    """One or two random edits: an access or a thread added, a kind or a location changed."""
    threads = [list(t) for t in threads]
    locations = sorted({loc for t in threads for _, loc in t}) or ["x"]
    choices = ["x", "y", "z"][:max(len(locations), 2)]
    for _ in range(rng.randint(1, 2)):
        m, total = rng.random(), sum(len(t) for t in threads)
        t = rng.choice(threads)
        if m < 0.35 and total < 10 and len(t) < 4:
            t.insert(rng.randint(0, len(t)), (rng.choice("RWU"), rng.choice(choices)))
        elif m < 0.55 and len(threads) < 4 and total < 10:
            loc = rng.choice(locations)
            threads.append(rng.choice([[("R", loc), ("R", rng.choice(locations))], [("W", loc)],
                                       [("U", loc)], [("R", loc)]]))
        elif m < 0.75:
            j = rng.randrange(len(t))
            kind, loc = t[j]
            t[j] = (rng.choice([c for c in "RWU" if c != kind]), loc)
        else:
            j = rng.randrange(len(t))
            t[j] = (t[j][0], rng.choice(choices))
    return [t for t in threads if t]


def pick_shape(rng, shapes):
    r = rng.random()
    if r < 0.1:
        return "rand", random_shape(rng)
    name = rng.choice(sorted(shapes))
    if r < 0.4:
        return name + "~", mutate(rng, shapes[name])
    return name, [list(t) for t in shapes[name]]


def flavour(rng, mode, kind):
    """A load or store instruction for the test's flavour mode."""
    every = LOADS if kind == "R" else STORES
    if mode == "strong":
        return rng.choice(every[1:])
    if mode == "weak":
        return rng.choice([every[0], every[0], every[7], every[1]])
    if mode == "relacq":
        return rng.choice(every[4:7] + [every[2]])
    return rng.choice(every)


def rmw(rng, register, loc, value):
    semantics, scope = rng.choice(RMW_SEMANTICS), rng.choice(SCOPES)
    op = rng.choice(["add", "exch", "exch", "cas"])
    if op == "cas":
        return f"atom.{semantics}.{scope}.cas {register}, {loc}, {rng.choice([0, 0, 1])}, {value}"
    return f"atom.{semantics}.{scope}.{op} {register}, {loc}, {value}"


def build(rng, shape, mode):
    """The threads' instructions for `shape`: every write of a location stores a new value."""
    values = {}
    fence_chance = {"fence": 0.6, "uniform": 0.25}.get(mode, 0.15)
    rmw_chance = {"rmw": 0.6}.get(mode, 0.15)
    threads = []
    for i, accesses in enumerate(shape):
        t, last = Thread(), None
        for j, (kind, loc) in enumerate(accesses):
            if j > 0 and rng.random() < fence_chance:
                t.instructions.append(rng.choice(FENCES))
            if kind == "R":
                last = t.register()
                if rng.random() < rmw_chance * 0.5:
                    t.instructions.append(f"atom.{rng.choice(RMW_SEMANTICS)}."
                                          f"{rng.choice(SCOPES)}.add {last}, {loc}, 0")
                else:
                    t.instructions.append(f"{flavour(rng, mode, 'R')} {last}, {loc}")
                continue
            values[loc] = values.get(loc, 0) + 1
            value = values[loc]
            if kind == "U" or rng.random() < rmw_chance:
                if kind == "W" and rng.random() < 0.25:
                    t.instructions.append(
                        f"red.{rng.choice(RED_SEMANTICS)}.{rng.choice(SCOPES)}.add {loc}, {value}")
                    continue
                last = t.register()
                t.instructions.append(rmw(rng, last, loc, value))
                continue
            store = flavour(rng, mode, "W")
            if last is not None and rng.random() < 0.12:
                # A store that depends on the last read, by data or by a branch.
                if rng.random() < 0.5:
                    sum_register = t.register()
                    t.instructions.append(f"add {sum_register}, {last}, {value}")
                    t.instructions.append(f"{store} {loc}, {sum_register}")
                else:
                    t.instructions += [f"bne {last}, 0, L{i}x{j}", f"{store} {loc}, {value}",
                                       f"L{i}x{j}:"]
                continue
            t.instructions.append(f"{store} {loc}, {value}")
        threads.append(t)
    return threads, sorted({loc for t in shape for _, loc in t})


def placement(rng, n):
    """Where the threads run: (CTA, GPU) each, and a word for it."""
    kind = rng.choice(["same", "cross", "cross", "mixed", "mixed", "gpu"])
    if kind == "same":
        return kind, [(0, 0)] * n
    if kind == "cross":
        return kind, [(i, 0) for i in range(n)]
    if kind == "mixed":
        while True:
            ctas = [rng.randint(0, n - 1) for _ in range(n)]
            if len(set(ctas)) not in (1, n) or n == 2:
                return kind, [(c, 0) for c in ctas]
    while True:
        gpus = [rng.randint(0, 1) for _ in range(n)]
        if len(set(gpus)) == 2:
            return kind, [(rng.randint(0, 1), g) for g in gpus]


def render(name, threads, locations, where):
    """The litmus file: every register and location in the condition, so that `litmus model`
    and the simulator list whole final states."""
    lines = [f"PTX {name}", "{", " ".join(f"{loc}=0;" for loc in locations)]
    init = [f"P{i}:r{k}=0;" for i, t in enumerate(threads) for k in range(t.registers)]
    if init:
        lines.append(" ".join(init))
    lines.append("}")
    heads = [f"P{i}@cta {c},gpu {g}" for i, (c, g) in enumerate(where)]
    rows = max(len(t.instructions) for t in threads)
    columns = [[heads[i]] + t.instructions + [""] * (rows - len(t.instructions))
               for i, t in enumerate(threads)]
    widths = [max(len(s) for s in column) for column in columns]
    for r in range(rows + 1):
        cells = (column[r].ljust(w) for column, w in zip(columns, widths))
        lines.append(" " + " | ".join(cells) + " ;")
    condition = [f"P{i}:r{k} == 0" for i, t in enumerate(threads) for k in range(t.registers)]
    condition += [f"{loc} == 0" for loc in locations]
    lines += ["exists", "(" + " /\\ ".join(condition) + ")"]
    return "\n".join(lines) + "\n"


def generate(directory, count, seed, shapes):
    """Writes `count` distinct tests (a function of `seed`); returns their names."""
    rng, seen, names = random.Random(seed), set(), []
    for _ in range(count * 50):
        if len(names) == count:
            break
        shape_name, shape = pick_shape(rng, shapes)
        if not 2 <= len(shape) <= 4:
            continue
        mode = rng.choice(["uniform", "strong", "weak", "relacq", "rmw", "fence"])
        threads, locations = build(rng, shape, mode)
        if sum(len(t.instructions) for t in threads) > 14 or \
                any(len(t.instructions) > 7 for t in threads):
            continue
        kind, where = placement(rng, len(threads))
        key = repr(([t.instructions for t in threads], where))
        if key in seen:
            continue
        seen.add(key)
        digest = hashlib.sha1(key.encode()).hexdigest()[:6]
        safe = re.sub(r"[^A-Za-z0-9]", "p", shape_name)
        name = f"F-{safe}-{mode}-{kind}-{len(names):04d}-{digest}"
        with open(os.path.join(directory, name + ".litmus"), "w") as f:
            f.write(render(name, threads, locations, where))
        names.append(name)
    return names


STATE = re.compile(r"^\s*(\d+\s+)?[*:]>(.*?)\s*(\(weak\))?\s*$")


def states(text):
    """The final states a `litmus model` or `litmus run` output lists."""
    found = set()
    for line in text.splitlines():
        m = STATE.match(line)
        if m and "=" in m.group(2):
            found.add(" ".join(sorted(p.strip() for p in m.group(2).split(";") if p.strip())))
    return found


def output(gpuwmm, args, path):
    """Runs `gpuwmm args`, keeping its output at `path` (only once it succeeded)."""
    if os.path.exists(path):
        return open(path).read()
    done = subprocess.run([gpuwmm] + args, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"fuzz-litmus: `gpuwmm {' '.join(args)}` failed ({done.returncode}):\n"
              f"{done.stderr or done.stdout}", file=sys.stderr)
        sys.exit(2)
    with open(path + ".part", "w") as f:
        f.write(done.stdout)
    os.replace(path + ".part", path)
    return done.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("outdir")
    p.add_argument("--tests", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--executions", type=int, default=20000)
    p.add_argument("--shapes", choices=sorted(SHAPE_SETS), default="all")
    p.add_argument("--gpuwmm", default="gpuwmm", help="the binary (default: on PATH)")
    a = p.parse_args()
    if a.tests < 1 or a.executions < 1:
        p.error("--tests and --executions take a whole number of at least 1")
    tests, out = os.path.join(a.outdir, "tests"), os.path.join(a.outdir, "out")
    os.makedirs(tests, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    names = generate(tests, a.tests, a.seed, SHAPE_SETS[a.shapes])
    unsound, unreached = [], 0
    for k, name in enumerate(names):
        test = os.path.join(tests, name + ".litmus")
        allowed = states(output(a.gpuwmm, ["litmus", "model", test],
                                os.path.join(out, name + ".model")))
        seen = states(output(a.gpuwmm, ["litmus", "run", test, "--backend", "sim",
                                        "--seed", str(a.seed),
                                        "--executions", str(a.executions),
                                        "--max-executions", str(a.executions)],
                             os.path.join(out, name + ".sim")))
        if seen - allowed:
            unsound.append((name, sorted(seen - allowed)))
        unreached += bool(allowed - seen)
        if sys.stderr.isatty():
            print(f"\r{k + 1}/{len(names)} tests, UNSOUND {len(unsound)}", end="",
                  file=sys.stderr)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"{len(names)} tests (seed {a.seed}, {a.executions} executions each, simulator against "
          f"the axiomatic model): UNSOUND {len(unsound)}; with an allowed state not reached "
          f"{unreached}")
    for name, extra in unsound:
        print(f"UNSOUND {tests}/{name}.litmus: {'; '.join(extra)}")
    return 1 if unsound else 0


if __name__ == "__main__":
    sys.exit(main())
