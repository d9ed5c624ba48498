"""How far the sweep's whole config travels from `run_sweep`: a static call graph over kbx_ray/
(`ast` only; nothing is imported). Issue 40: at most 30 places and 10 returns.

A value is *whole* when it is the config or the plan: a parameter annotated with a WHOLE type
(`Config`, or the resolved plan `Sweep`), a local assigned one (`p = ... resolve(what)`), or a
call of a function whose return annotation names one. A *place* is a function that receives a
whole value: the start (`orchestration.engine.run_sweep`), and any function a place calls with a
whole argument, bound to the callee's parameter by position or keyword, whatever that parameter's
name or annotation. A call that passes a piece (`p.engine`, `cfg.suite`) ends the trail there, and
so does reading the plan's own methods (`p.todo()`). Calls resolve through imports (function-level
ones too), package re-exports, `self.method` and a class's `__init__` (other calls on objects
are out of a static trail's sight); a nested function counts as part of the one that holds it (a
closure sees its whole values).

Figures: places; modules (distinct modules among them); returns (in the depth-first order of
visiting, callees in source order, how often the trail enters a module it had already left);
functions anywhere in kbx_ray/ with a parameter annotated `Config`; `getattr(<cfg|config|plan|
sweep|p>, ...)` calls (settings read by name, out of a static trail's sight). `-s` prints them.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kbx_ray"
START = "kbx_ray.orchestration.engine.run_sweep"
WHOLE = {"Config", "Sweep"}
READ_NAMES = {"cfg", "config", "plan", "sweep", "p"}
MAX_PLACES, MAX_RETURNS = 30, 10

Func = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Def:
    module: str
    node: Func
    cls: str = ""                                  # the class it is a method of


@dataclass
class Module:
    name: str
    tree: ast.Module
    defs: dict[str, Def] = field(default_factory=dict)       # top-level and Class.method names
    imports: dict[str, str] = field(default_factory=dict)    # local name -> dotted target


def _names(annotation: ast.expr | None) -> set[str]:
    """The type names an annotation mentions (string annotations parsed)."""
    if annotation is None:
        return set()
    out = set()
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                out |= _names(ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                pass
    return out


def _imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name it is bound to, by every import at any depth."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update({a.asname: a.name for a in node.names if a.asname})
            out.update({a.name.split(".")[0]: a.name.split(".")[0]
                        for a in node.names if not a.asname})
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    return out


def load(root: Path = PACKAGE) -> dict[str, Module]:
    mods = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mod = Module(name, ast.parse(path.read_text(), str(path)))
        mod.imports = _imports(mod.tree)
        for node in mod.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                mod.defs[node.name] = Def(name, node)
            elif isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        mod.defs[f"{node.name}.{sub.name}"] = Def(name, sub, node.name)
        mods[name] = mod
    return mods


class Trail:
    def __init__(self, mods: dict[str, Module]) -> None:
        self.mods = mods

    def lookup(self, dotted: str, depth: int = 0) -> Def | None:
        """The def a dotted name is, following a package's re-exports."""
        module, _, attr = dotted.rpartition(".")
        mod = self.mods.get(module)
        if mod is None or depth > 5:
            return None
        if attr in mod.defs or f"{attr}.__init__" in mod.defs:
            return mod.defs.get(attr) or mod.defs[f"{attr}.__init__"]
        return self.lookup(mod.imports[attr], depth + 1) if attr in mod.imports else None

    def callee(self, d: Def, func: ast.expr) -> Def | None:
        """What a call of `func` runs: a function, a method of `d`'s own class (`self.f`), or a
        class's `__init__`; None where the name does not resolve statically."""
        mod = self.mods[d.module]
        if isinstance(func, ast.Name):
            if func.id in mod.defs or f"{func.id}.__init__" in mod.defs:
                return mod.defs.get(func.id) or mod.defs[f"{func.id}.__init__"]
            return self.lookup(mod.imports[func.id]) if func.id in mod.imports else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == "self" and d.cls:
                return mod.defs.get(f"{d.cls}.{func.attr}")
            target = mod.imports.get(func.value.id)
            if target in self.mods:
                return self.lookup(f"{target}.{func.attr}")
        return None

    def _whole(self, d: Def, expr: ast.expr | None, held: dict[str, set[str]]) -> set[str]:
        """The WHOLE types `expr` evaluates to (empty: not the whole config or plan)."""
        if isinstance(expr, ast.Name):
            return held.get(expr.id, set())
        if isinstance(expr, ast.IfExp):
            return self._whole(d, expr.body, held) | self._whole(d, expr.orelse, held)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and \
                expr.func.id == "replace" and expr.args:  # dataclasses.replace: a new whole one
            return self._whole(d, expr.args[0], held)
        if isinstance(expr, ast.Call):
            target = self.callee(d, expr.func)
            return _names(target.node.returns) & WHOLE if target else set()
        return set()

    def held(self, d: Def, given: dict[str, set[str]]) -> dict[str, set[str]]:
        """Name -> WHOLE types, for the names in `d` (closures included) that hold a whole value."""
        held = dict(given)
        args = d.node.args
        for a in args.posonlyargs + args.args + args.kwonlyargs:
            if _names(a.annotation) & WHOLE:
                held[a.arg] = _names(a.annotation) & WHOLE
        for _ in range(3):  # locals assigned from whole values, to a fixed point
            for node in ast.walk(d.node):
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    kinds = self._whole(d, node.value, held)
                    if isinstance(node, ast.AnnAssign):
                        kinds |= _names(node.annotation) & WHOLE
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if isinstance(t, ast.Name) and kinds:
                            held[t.id] = held.get(t.id, set()) | kinds
        return held

    def steps(self, d: Def, held: dict[str, set[str]]) -> list[tuple[Def, dict[str, set[str]]]]:
        """(callee, what it holds on entry) for each place `d` hands a whole value, in source
        order."""
        found = []
        for node in ast.walk(d.node):
            if isinstance(node, ast.Call):
                target = self.callee(d, node.func)
                if target is None:
                    continue
                params = target.node.args.posonlyargs + target.node.args.args
                params = params[1:] if target.cls else params  # self, bound by the call
                bound = [(params[i], a) for i, a in enumerate(node.args) if i < len(params)]
                by_name = {a.arg: a for a in params + target.node.args.kwonlyargs}
                bound += [(by_name[k.arg], k.value) for k in node.keywords if k.arg in by_name]
                given = {param.arg: self._whole(d, arg, held) for param, arg in bound
                         if self._whole(d, arg, held)}
                if given:
                    found.append((node, target, given))
        found.sort(key=lambda f: (f[0].lineno, f[0].col_offset))
        return [(target, given) for _, target, given in found]

    def walk(self, start: str) -> list[Def]:
        """The places, in depth-first order of visiting."""
        first = self.lookup(start)
        assert first is not None, f"{start} not found"
        order: list[Def] = []
        seen: set[tuple[str, str]] = set()

        def visit(d: Def, given: dict[str, set[str]]) -> None:
            seen.add(key(d))
            order.append(d)
            for target, held in self.steps(d, self.held(d, given)):
                if key(target) not in seen:
                    visit(target, held)

        visit(first, {})
        return order


def key(d: Def) -> tuple[str, str]:
    return d.module, f"{d.cls}.{d.node.name}" if d.cls else d.node.name


def returns(modules: list[str]) -> int:
    """How often the sequence enters a module it had already left."""
    seen, count = set(), 0
    for prev, cur in zip(modules, modules[1:]):
        seen.add(prev)
        if cur != prev and cur in seen:
            count += 1
    return count


def figures(root: Path = PACKAGE, start: str = START) -> dict[str, object]:
    mods = load(root)
    order = Trail(mods).walk(start)
    modules = [d.module for d in order]
    takes_config = [d for m in mods.values() for d in m.defs.values()
                    if any("Config" in _names(a.annotation) for a in d.node.args.args
                           + d.node.args.posonlyargs + d.node.args.kwonlyargs)]
    reads = sum(1 for m in mods.values() for n in ast.walk(m.tree)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                and n.func.id == "getattr" and n.args and isinstance(n.args[0], ast.Name)
                and n.args[0].id in READ_NAMES)
    return {"places": len(order), "modules": len(set(modules)), "returns": returns(modules),
            "takes_config": len(takes_config), "getattr_reads": reads,
            "trail": [".".join(key(d)) for d in order]}


def test_the_config_trail_from_run_sweep_is_short() -> None:
    f = figures()
    line = (f"places={f['places']} modules={f['modules']} returns={f['returns']} "
            f"functions taking Config={f['takes_config']} getattr reads={f['getattr_reads']}")
    print("\nconfig trail:", line, "\n  " + "\n  ".join(f["trail"]))  # type: ignore[arg-type]
    assert "kbx_ray.config.plan.resolve" in f["trail"], f"the trail misses the plan: {f['trail']}"
    assert f["places"] <= MAX_PLACES and f["returns"] <= MAX_RETURNS, \
        f"{line}; the trail: {f['trail']}"


def test_the_measure_follows_whole_values_and_counts_returns(tmp_path: Path) -> None:
    """On a made-up package: a plan made from the config and a parameter of any name carry the
    trail on (into a class's `__init__` and its `self.` calls too), a piece or the plan's own
    methods do not, and each re-entry of a left module is a return."""
    pkg = tmp_path / "kbx_ray"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "from kbx_ray import b\nfrom kbx_ray.b import Sweep, plan\n"
        "def run(cfg: Config) -> None:\n"
        "    p = plan(cfg)\n    helper(p)\n    b.piece(cfg.engine, p.engine)\n    b.last(1, s=p)\n"
        "    Holder(cfg)\n"
        "def helper(x):\n    x.todo()\n"
        "class Holder:\n    def __init__(self, c):\n        self.use(c)\n"
        "    def use(self, c):\n        pass\n")
    (pkg / "b.py").write_text(
        "class Sweep:\n    def todo(self):\n        return []\n"
        "def plan(cfg: Config) -> Sweep:\n    return Sweep()\n"
        "def piece(engine, more):\n    pass\n"
        "def last(n, s):\n    pass\n")
    f = figures(pkg, "kbx_ray.a.run")
    assert f["trail"] == ["kbx_ray.a.run", "kbx_ray.b.plan", "kbx_ray.a.helper", "kbx_ray.b.last",
                          "kbx_ray.a.Holder.__init__", "kbx_ray.a.Holder.use"]
    assert (f["places"], f["modules"], f["returns"], f["takes_config"]) == (6, 2, 3, 2)
