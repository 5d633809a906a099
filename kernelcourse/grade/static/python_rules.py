"""The Triton file is parsed (never imported) and held to an allowlist, with its line:
  * imports: kernelcourse (bare: importing it picks the interpreter), torch, triton,
    triton.language, math; never typing (its namespace holds sys, and get_type_hints
    evaluates strings) nor __future__ (its annotations feature turns every annotation into
    a string evaluated later);
  * each module only for an exact list of names (triton_allowlist.py: what the course's
    Triton files and a GEMM kernel use), never an attribute of such a name (tl.core.x,
    torch.float32.x) and never a module as a value: no module object is ever reachable;
  * every other name is one the file binds (an assignment, a parameter, a loop variable,
    a def) or an allowed builtin: nothing reaches the file from outside it (Triton's
    interpreter copies its own globals, numpy and inspect among them, into the module);
  * no eval/exec/compile/__import__/open/getattr/globals/vars..., no name or attribute
    starting with an underscore, no class, global, try, with, match, :=, yield, lambda in
    a kernel, nested def or import inside a function;
  * code that runs when a def runs is held to constant rules: a default is a constant, a
    decorator is @triton.jit under at most one @triton.autotune(configs=[triton.Config(
    {...}, num_warps=..., num_stages=...)], key=[...]) (no hook, pruner or heuristic: each
    is a host callable Triton would call), an annotation is tl.constexpr, torch.Tensor,
    int, float, bool, str or None (never a string);
  * outside @triton.jit functions, launch plumbing only: no @, no slicing or indexed
    stores, no augmented assignment, loops over range() only, tensor attributes limited to
    HOST_ATTRIBUTES: the arithmetic has to happen in a kernel;
  * inside @triton.jit functions (which the interpreter runs as Python, where a constexpr
    argument may be any host object): no name bound to torch or math, calls only to tl.*,
    other jit functions and range/min/max, attributes only JIT_ATTRIBUTES, indexing only
    with : and None (broadcasting).
"""
from __future__ import annotations

import ast

from .errors import Refused
from .triton_allowlist import (ALLOWED_NODES, ANNOTATIONS, AUTOTUNE_ARGUMENTS, BANNED_NAMES,
                               CONFIG_KEYWORDS, HOST_ATTRIBUTES, HOST_BUILTINS, IMPORTS,
                               JIT_ATTRIBUTES, JIT_BUILTINS, REFUSED_MODULES, REFUSED_NODES,
                               SCOPES, SUBMODULES)


# ------------------------------------------------------------------------- the Triton file

def check_triton(text: str, filename: str) -> None:
    """Raise Refused with the first rule the file breaks (its line); return if it keeps them."""
    try:
        tree = ast.parse(text, filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Refused(f"{filename} does not parse: {exc}") from None
    _Triton(filename).run(tree)


def _bound(body: list) -> set[str]:
    """The names a block of statements binds: assignment and loop targets and defs, not
    those of the comprehensions, lambdas and functions inside it (scopes of their own)."""
    names, todo = set(), list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, SCOPES):
            names.update([node.name] if hasattr(node, "name") else [])
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return names


def _aliases(tree: ast.Module) -> dict[str, str]:
    """What each top-level import binds (local name -> module, or module.name), unchecked:
    enough to tell which defs are kernels before the checked pass reaches the imports."""
    names = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                names[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node, names: dict[str, str]) -> str | None:
    """'triton.jit' for triton.jit, tt.jit (import triton as tt) or jit (from triton import
    jit), given what each imported name stands for; None for anything else."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value, names)):
        return f"{base}.{node.attr}"
    return None


def _parameters(args: ast.arguments) -> list[ast.arg]:
    return [*args.posonlyargs, *args.args, *args.kwonlyargs,
            *([args.vararg] if args.vararg else []), *([args.kwarg] if args.kwarg else [])]


class _Triton(ast.NodeVisitor):
    def __init__(self, filename: str):
        self.filename = filename
        self.modules: dict[str, str] = {}        # local name -> the module it is bound to
        self.imported: dict[str, str] = {}       # local name -> the module.name it imports
        self.jit: set[str] = set()               # names of @triton.jit functions in the file
        self.defined: set[str] = set()           # every function the file defines
        self.constants: set[str] = set()         # names the module level assigns
        self.scopes: list[set[str]] = []         # names bound in each enclosing function
        self.in_jit = False

    def refuse(self, node, what: str):
        raise Refused(f"{self.filename}, line {getattr(node, 'lineno', '?')}: {what}")

    def run(self, tree: ast.Module):
        aliases = _aliases(tree)
        for node in tree.body:                   # functions first: the host may call them
            if isinstance(node, ast.FunctionDef):
                self.defined.add(node.name)
                if node.decorator_list and _dotted(node.decorator_list[-1], aliases) == "triton.jit":
                    self.jit.add(node.name)
        self.constants = _bound(tree.body) - self.defined
        self.visit(tree)

    def visit(self, node):
        if isinstance(node, tuple(REFUSED_NODES)):
            self.refuse(node, REFUSED_NODES[type(node)])
        if not isinstance(node, ALLOWED_NODES):
            self.refuse(node, f"uses {type(node).__name__}, which a kernel file does not need")
        return super().visit(node)

    # -- what a name or a dotted name stands for
    def _spelled(self, node) -> str | None:
        return _dotted(node, {**self.modules, **self.imported})

    def _lookup(self, name: str) -> bool:
        return any(name in scope for scope in self.scopes) or name in self.constants | self.defined

    # -- imports: module level only, allowed modules only, exact names only
    def visit_Import(self, node):
        if self.scopes:
            self.refuse(node, "imports inside a function: imports belong at the top of the file")
        for alias in node.names:
            if alias.name.split(".")[0] in REFUSED_MODULES:
                self.refuse(node, f"imports {alias.name}: {REFUSED_MODULES[alias.name.split('.')[0]]}")
            if alias.name not in IMPORTS:
                self.refuse(node, f"imports {alias.name}; a submission may import only "
                                  f"{', '.join(sorted(IMPORTS))}")
            local = alias.asname or alias.name.split(".")[0]
            module = alias.name if alias.asname else alias.name.split(".")[0]
            if self.modules.get(local) != module:      # import triton, then triton.language
                self._binds(node, local)
            self.modules[local] = module

    def visit_ImportFrom(self, node):
        module = node.module or ""
        if self.scopes:
            self.refuse(node, "imports inside a function: imports belong at the top of the file")
        if module.split(".")[0] in REFUSED_MODULES and not node.level:
            self.refuse(node, f"imports from {module}: {REFUSED_MODULES[module.split('.')[0]]}")
        if node.level or module not in IMPORTS:
            self.refuse(node, f"imports from {module or '.'}; a submission may import only "
                              f"{', '.join(sorted(IMPORTS))}")
        for alias in node.names:
            full, local = f"{module}.{alias.name}", alias.asname or alias.name
            self._binds(node, local)
            if full in SUBMODULES:
                self.modules[local] = full
            elif alias.name in IMPORTS[module]:
                self.imported[local] = full
            else:
                self.refuse(node, f"imports {full}, which a kernel submission may not use")

    def _binds(self, node, name: str):
        """Module aliases, imported names, defs and the allowed builtins keep what they are:
        rebinding one would let the file call a library name by a name the check trusts."""
        if name in self.modules or name in self.imported or name in self.defined:
            self.refuse(node, f"rebinds {name}, a name this file imports or defines")
        if name in HOST_BUILTINS | JIT_BUILTINS:
            self.refuse(node, f"rebinds {name}, a builtin the check allows")

    # -- names: bound in the file, or an allowed builtin
    def visit_Name(self, node):
        name = node.id
        if name in BANNED_NAMES or (name.startswith("__") and name != "__name__"):
            self.refuse(node, f"uses {name}, which a submission may not use (no dynamic "
                              "imports, eval, file access or introspection)")
        if isinstance(node.ctx, ast.Store):
            self._binds(node, name)
            return
        origin = self.modules.get(name) or self.imported.get(name, "")
        if self.in_jit and origin and not origin.startswith("triton"):
            self.refuse(node, f"uses {name} inside a @triton.jit function: a kernel computes "
                              "with tl.* only")
        if name in self.modules:
            self.refuse(node, f"uses the module {name} as a value: a kernel file may use only "
                              f"{name}.<name> for the names it allows")
        builtins = JIT_BUILTINS if self.in_jit else HOST_BUILTINS
        if not (name in self.imported or self._lookup(name) or name in builtins):
            where = "inside a @triton.jit function" if self.in_jit else "outside a kernel"
            shown = ", ".join(sorted(b for b in builtins if not b.startswith("_")))
            self.refuse(node, f"uses {name}, which this file does not define ({where} the "
                              f"builtins allowed are {shown})")

    # -- attributes: a module's allowed names, a value's allowed attributes
    def visit_Attribute(self, node):
        if node.attr.startswith("_"):
            self.refuse(node, f"uses .{node.attr}: no private or special attributes")
        if isinstance(node.ctx, ast.Store):
            self.refuse(node, f"assigns to {ast.unparse(node)}: a kernel file sets no attribute")
        base = self._spelled(node.value)
        if base is not None and (base in self.modules.values() or base in SUBMODULES):
            self._module_name(node, base)
            return
        self.visit(node.value)                    # what it is taken from is named first
        if base is not None:                      # tl.float32.x, torch.Tensor.x, jit.x
            self.refuse(node, f"uses {ast.unparse(node)}: an attribute of "
                              f"{ast.unparse(node.value)} (a kernel file may use "
                              f"{ast.unparse(node.value)} itself, nothing inside it)")
        if not self.in_jit and node.attr not in HOST_ATTRIBUTES:
            self.refuse(node, f"uses {ast.unparse(node)} outside a @triton.jit function; there "
                              f"a tensor may give only {', '.join(sorted(HOST_ATTRIBUTES))}")
        if self.in_jit and node.attr not in JIT_ATTRIBUTES:
            self.refuse(node, f"uses {ast.unparse(node)} inside a @triton.jit function; there "
                              f"a value may give only {', '.join(sorted(JIT_ATTRIBUTES))}")

    def _module_name(self, node, module: str):
        full = f"{module}.{node.attr}"
        if self.in_jit and not module.startswith("triton"):
            self.refuse(node, f"uses {ast.unparse(node.value)} inside a @triton.jit function: a "
                              "kernel computes with tl.* only")
        if full not in SUBMODULES and node.attr not in IMPORTS.get(module, ()):
            self.refuse(node, f"uses {ast.unparse(node)}, which a kernel submission may not "
                              "use (a library GEMM, any library arithmetic or module is not a kernel)")

    # -- functions: what runs when the def runs, and which rules hold inside
    def visit_FunctionDef(self, node):
        if self.scopes:
            self.refuse(node, "defines a function inside a function")
        if node.name.startswith("__"):
            self.refuse(node, f"defines {node.name}, a special name")
        self._decorators(node)
        params = _parameters(node.args)
        for default in [*node.args.defaults, *filter(None, node.args.kw_defaults)]:
            self._constant(default, "a default value", "defaults are evaluated on the host "
                                                       "when the def runs")
            self.visit(default)
        for param in params:
            self._binds(param, param.arg)
            self._annotation(param.annotation)
        self._annotation(node.returns)
        self.in_jit = node.name in self.jit
        self.scopes.append({p.arg for p in params} | _bound(node.body))
        for child in node.body:
            self.visit(child)
        self.scopes.pop()
        self.in_jit = False

    def _decorators(self, node):
        spelled = [self._spelled(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
        if not spelled:
            return
        if spelled[-1] != "triton.jit" or isinstance(node.decorator_list[-1], ast.Call) or \
                len(spelled) > 2 or (len(spelled) == 2 and not (
                    spelled[0] == "triton.autotune" and isinstance(node.decorator_list[0], ast.Call))):
            self.refuse(node.decorator_list[0], f"decorates {node.name} with "
                        f"{', '.join('@' + ast.unparse(d) for d in node.decorator_list)}: a function "
                        "may carry only @triton.jit, under at most one @triton.autotune(...)")
        if len(spelled) == 2:
            self.visit(node.decorator_list[0])      # visit_Call holds autotune to its rules

    def _annotation(self, node):
        if node is None or (isinstance(node, ast.Constant) and node.value is None):
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            self.refuse(node, f"annotates with the string {node.value!r}: typing would "
                              "evaluate it later as code; write the annotation itself")
        spelled = self._spelled(node) or (node.id if isinstance(node, ast.Name) else None)
        if spelled not in ANNOTATIONS:
            self.refuse(node, f"annotates with {ast.unparse(node)}: an annotation is evaluated "
                              "when the def runs, so a kernel file may annotate only with "
                              "tl.constexpr, torch.Tensor, int, float, bool, str or None")

    def _constant(self, node, what: str, why: str):
        """A value fixed before the file runs: literals, the file's own module-level
        constants, a module's allowed names (tl.float32), and arithmetic of those."""
        if isinstance(node, (ast.Tuple, ast.List)):
            parts = node.elts
        elif isinstance(node, ast.UnaryOp):
            parts = [node.operand]
        elif isinstance(node, ast.BinOp):
            parts = [node.left, node.right]
        elif (isinstance(node, ast.Constant)
              or (isinstance(node, ast.Name) and node.id in self.constants)
              or (isinstance(node, ast.Attribute) and self._spelled(node) is not None)):
            parts = []
        else:
            self.refuse(node, f"gives {what} {ast.unparse(node)}, which is not a constant "
                              f"({why})")
        for part in parts:
            self._constant(part, what, why)

    def visit_Lambda(self, node):
        if self.in_jit:
            self.refuse(node, "defines a lambda inside a @triton.jit function")
        if node.args.defaults or any(node.args.kw_defaults):
            self.refuse(node, "gives a lambda a default value: defaults are evaluated on the host")
        for param in _parameters(node.args):
            self._binds(node, param.arg)
        self.scopes.append({p.arg for p in _parameters(node.args)})
        self.visit(node.body)
        self.scopes.pop()

    def _comprehension(self, node, parts):
        self.scopes.append({n.id for g in node.generators for n in ast.walk(g.target)
                            if isinstance(n, ast.Name)})
        for generator in node.generators:
            self.visit(generator)
        for part in parts:
            self.visit(part)
        self.scopes.pop()

    def visit_ListComp(self, node):
        self._comprehension(node, [node.elt])

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node):
        self._comprehension(node, [node.key, node.value])

    def visit_AnnAssign(self, node):
        self._annotation(node.annotation)
        for child in (node.value, node.target):
            if child is not None:
                self.visit(child)

    def visit_Assign(self, node):
        self.visit(node.value)                    # evaluated first, so named first
        for target in node.targets:
            self.visit(target)

    def visit_JoinedStr(self, node):
        if self.in_jit:
            self.refuse(node, "formats a string (f-string) inside a @triton.jit function")
        self.generic_visit(node)

    # -- calls: what each callee may be, and Triton's host callables
    def visit_Call(self, node):
        func = node.func
        self.visit(func)                          # a banned name is named as such first
        spelled = self._spelled(func)
        if self.in_jit and isinstance(func, ast.Name) and func.id not in self.jit | JIT_BUILTINS \
                and not (spelled or "").startswith("triton.language."):
            self.refuse(node, f"calls {func.id}() inside a @triton.jit function")
        if not self.in_jit and isinstance(func, ast.Name) and \
                func.id not in set(self.imported) | self.defined | HOST_BUILTINS:
            self.refuse(node, f"calls {func.id}() outside a @triton.jit function")
        if spelled == "triton.Config":
            self._config(node)
        elif spelled == "triton.autotune":
            self._autotune(node)
        for child in [*node.args, *node.keywords]:
            self.visit(child)

    def _config(self, node):
        """triton.Config({"BLOCK_M": 64, ...}, num_warps=4, num_stages=3): constants only
        (a pre_hook would be a host callable run before every launch)."""
        if len(node.args) != 1 or not isinstance(node.args[0], ast.Dict) or None in node.args[0].keys:
            self.refuse(node, "calls triton.Config without a {name: value} dict of constants as "
                              "its one positional argument")
        for value in node.args[0].values:
            self._constant(value, "a triton.Config value", "a configuration holds constants")
        for keyword in node.keywords:
            if keyword.arg not in CONFIG_KEYWORDS:
                self.refuse(keyword, f"passes {keyword.arg or '**'}= to triton.Config: a kernel "
                                     f"file may give it only {', '.join(sorted(CONFIG_KEYWORDS))} "
                                     "(a hook is host code Triton would run at each launch)")
            self._constant(keyword.value, f"{keyword.arg}=", "a configuration holds constants")

    def _autotune(self, node):
        """triton.autotune(configs=[...], key=[...]) and nothing else: prune_configs_by,
        perf_model, pre_hook, post_hook, do_bench... are host callables."""
        given = dict(zip(AUTOTUNE_ARGUMENTS, node.args))
        for keyword in node.keywords:
            if keyword.arg not in AUTOTUNE_ARGUMENTS or keyword.arg in given:
                self.refuse(keyword, f"passes {keyword.arg or '**'}= to triton.autotune: a "
                                     "kernel file may give it only configs= and key= (the "
                                     "others are host code Triton would run)")
            given[keyword.arg] = keyword.value
        if len(node.args) > 2 or set(given) != set(AUTOTUNE_ARGUMENTS):
            self.refuse(node, "calls triton.autotune without exactly configs= and key=")
        configs, key = given["configs"], given["key"]
        if not (isinstance(configs, (ast.List, ast.Tuple)) or
                (isinstance(configs, ast.Name) and configs.id in self.constants)):
            self.refuse(configs, "gives triton.autotune configs= that is not a list of "
                                 "triton.Config (or a module-level name for one)")
        if not isinstance(key, (ast.List, ast.Tuple)) or not all(
                isinstance(k, ast.Constant) and isinstance(k.value, str) for k in key.elts):
            self.refuse(key, "gives triton.autotune key= that is not a list of argument names")

    # -- host code: launch plumbing only
    def visit_BinOp(self, node):
        if isinstance(node.op, ast.MatMult) and not self.in_jit:
            self.refuse(node, "multiplies with @ outside a kernel")
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        if not self.in_jit:
            self.refuse(node, "updates a value in place (+= and kin) outside a kernel")
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if self.in_jit:
            index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            broadcast = all(isinstance(i, ast.Slice) and i.lower is i.upper is i.step is None
                            or isinstance(i, ast.Constant) and i.value is None for i in index)
            if not broadcast or not isinstance(node.ctx, ast.Load):
                self.refuse(node, f"indexes {ast.unparse(node)} inside a @triton.jit function: "
                                  "a kernel indexes only with : and None (x[:, None])")
        else:
            launch = isinstance(node.value, ast.Name) and node.value.id in self.jit
            index = node.slice.operand if isinstance(node.slice, ast.UnaryOp) else node.slice
            constant = isinstance(index, ast.Constant) and isinstance(node.ctx, ast.Load)
            if not (launch or constant):
                self.refuse(node, f"indexes {ast.unparse(node)} outside a kernel: there only "
                                  "kernel[grid] launches and constant look-ups")
        self.generic_visit(node)

    def _iteration(self, node, iterable):
        if not self.in_jit:
            is_range = isinstance(iterable, ast.Call) and ast.unparse(iterable.func) == "range"
            if not (is_range or isinstance(iterable, (ast.Tuple, ast.List))):
                self.refuse(node, f"loops over {ast.unparse(iterable)} outside a kernel: only "
                                  "over range() or a literal list")

    def visit_For(self, node):
        self._iteration(node, node.iter)
        self.generic_visit(node)

    def visit_comprehension(self, node):
        self._iteration(node.iter, node.iter)
        self.generic_visit(node)
